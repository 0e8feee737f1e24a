-- Search filters by date range: without this index a date filter with a
-- common word reads every match (p95 405 ms at 1M messages; 11 ms with it).
CREATE INDEX messages_by_created ON messages(created_at);
