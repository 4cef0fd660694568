-- Per-endpoint rate limits: "off", or the spec's limits raised or lowered per operation, as
-- JSON text; NULL keeps the gateway's defaults.
ALTER TABLE endpoints ADD COLUMN rate_limits TEXT;
