-- Canopy as the Forest server of agents (http::liana): the schema ("apimap") the agents of an
-- environment upload with `POST /forest/apimaps`, kept as the JSON:API document they sent, with
-- the hash `POST /forest/apimaps/hashcheck` compares (the agent only uploads a changed schema).
CREATE TABLE apimaps (
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    schema_file_hash TEXT NOT NULL,
    document TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (project, environment)
);
