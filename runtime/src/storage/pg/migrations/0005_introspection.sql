-- The schema SQL introspection sees (views over the ratchet tables, compatibility functions). Its contents are
-- (re)created by the runtime at startup (introspection/views.ts), so that view definitions can evolve without
-- a migration each; only the schema itself is created here.
CREATE SCHEMA ratchet_sql;
