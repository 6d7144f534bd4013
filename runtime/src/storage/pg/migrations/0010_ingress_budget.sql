-- The cluster's ingress request budget (specification section 8: a managed ingress takes 36 000 requests per hour):
-- one token bucket for the whole cluster, from which every node leases small batches of tokens, so replicas share
-- the budget instead of multiplying it. `tokens` is what was left at `updated_at`; refills are computed on lease.
CREATE TABLE ratchet.ingress_budget (
  id integer PRIMARY KEY CHECK (id = 1),
  tokens double precision NOT NULL,
  updated_at timestamptz NOT NULL
);

-- A secret the nodes share: a request one node sends on to the partition's owner carries a proof made with it, so
-- that the owner neither counts it against the budget a second time nor takes a client's word for it.
INSERT INTO ratchet.meta (key, value)
VALUES ('forwarding_secret', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''))
ON CONFLICT (key) DO NOTHING;
