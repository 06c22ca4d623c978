-- Charts an admin added to a dashboard from the console (issue 22, Part 2 "Add a chart"), beside
-- those of the config file's `[[dashboard.chart]]`. `dashboard` is the collection whose
-- dashboard shows the chart, NULL for the home dashboard; `definition` is the chart as a
-- `[[dashboard.chart]]` entry would write it, in JSON.
CREATE TABLE dashboard_charts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    project TEXT NOT NULL,
    environment TEXT NOT NULL,
    dashboard TEXT,
    definition TEXT NOT NULL,
    created_by BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX dashboard_charts_env ON dashboard_charts (project, environment, id);
