-- PostgreSQL mirror of migrations/sqlite/20261201130000_add_profile_kind.sql (same version).
--
-- What a profile is for: `dynamic` (an ordered list of candidates) or `concrete` (one agent,
-- used interactively, with its own defaults).
ALTER TABLE profiles ADD COLUMN kind TEXT NOT NULL DEFAULT 'dynamic';
