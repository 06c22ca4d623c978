-- Workflow definitions (issue 13 §1): the file of the workflows folder that defines a workflow
-- (`source = 'file'`), named in messages and refusals ("edit workflows/refund.toml"), and the
-- listing's order. A workflow whose file disappears keeps its row, inactive, with
-- `source = 'api'` and no file.
ALTER TABLE workflows ADD COLUMN source_file TEXT;

CREATE INDEX workflows_listing ON workflows (project, environment, created_at DESC, id DESC);
