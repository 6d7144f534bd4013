#!/usr/bin/env bash
# End-to-end test of the operator on a real Kubernetes cluster (kind), for machines with Docker, kind, kubectl, helm
# and curl. Builds the runtime, operator and greeter images, loads them into a fresh kind cluster, installs the charts,
# creates a Cluster with the bundled (test-only) PostgreSQL, registers the greeter through a Deployment resource,
# invokes Greeter/greet through the ingress with the Cluster's token, deletes the registration, and removes the cluster.
#
# Where a tool or the Docker daemon is missing it prints "skipped: <reason>" and exits 0.
#
# Environment:
#   KIND_CLUSTER   name of the kind cluster (default ratchet-e2e; an existing cluster of that name is reused)
#   KEEP_CLUSTER   1 to leave the cluster running afterwards (for poking around)
#   TIMEOUT        kubectl wait timeout (default 10m)
set -euo pipefail

skip() {
  printf 'skipped: %s\n' "$1"
  exit 0
}

# Builtins only until the tools are known to exist: the test runs this with an empty PATH.
for tool in docker kind kubectl helm curl base64; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool is not installed"
done
docker info >/dev/null 2>&1 || skip "the Docker daemon is not reachable (docker info failed)"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

CLUSTER="${KIND_CLUSTER:-ratchet-e2e}"
TIMEOUT="${TIMEOUT:-10m}"
NS=ratchet-demo
OPERATOR_NS=ratchet-system
RUNTIME_IMAGE=ghcr.io/ratchet-dev/ratchet-runtime:dev
OPERATOR_IMAGE=ghcr.io/ratchet-dev/ratchet-operator:dev
GREETER_IMAGE=ratchet-e2e-greeter:dev
WORK="$(mktemp -d)"
PF_PID=""
CREATED_CLUSTER=0

log() { printf '\n==> %s\n' "$*"; }

diagnostics() {
  log "diagnostics"
  kubectl get ratchet -A -o wide || true
  kubectl get pods -A -o wide || true
  kubectl -n "$NS" get cluster.ratchet.dev,deployment.ratchet.dev -o yaml || true
  kubectl -n "$NS" get events --sort-by=.lastTimestamp | tail -n 40 || true
  kubectl -n "$OPERATOR_NS" logs -l app.kubernetes.io/name=ratchet-operator --tail=200 --prefix || true
  kubectl -n "$NS" logs -l app.kubernetes.io/instance=ratchet-test --tail=100 --prefix || true
}

cleanup() {
  local status=$?
  [ -n "$PF_PID" ] && kill "$PF_PID" 2>/dev/null || true
  [ "$status" -ne 0 ] && diagnostics
  if [ "${KEEP_CLUSTER:-0}" = 1 ]; then
    log "keeping kind cluster $CLUSTER (kind delete cluster --name $CLUSTER)"
  elif [ "$CREATED_CLUSTER" = 1 ]; then
    log "deleting kind cluster $CLUSTER"
    kind delete cluster --name "$CLUSTER" || true
  fi
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT

log "building images"
docker build -f runtime/Dockerfile -t "$RUNTIME_IMAGE" .
docker build -f operator/Dockerfile -t "$OPERATOR_IMAGE" .
docker build -t "$GREETER_IMAGE" test/e2e/kind

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "reusing kind cluster $CLUSTER"
else
  log "creating kind cluster $CLUSTER"
  kind create cluster --name "$CLUSTER" --wait 120s
  CREATED_CLUSTER=1
fi
kubectl config use-context "kind-$CLUSTER" >/dev/null

log "loading images into kind"
kind load docker-image --name "$CLUSTER" "$RUNTIME_IMAGE" "$OPERATOR_IMAGE" "$GREETER_IMAGE"

log "installing the charts (CRDs through the installCrds dependency)"
# Work on a copy: `helm dependency build` writes charts/ and Chart.lock into the chart directory.
cp -R charts "$WORK/charts"
helm dependency build "$WORK/charts/ratchet-operator" >/dev/null
helm upgrade --install ratchet-operator "$WORK/charts/ratchet-operator" \
  --namespace "$OPERATOR_NS" --create-namespace \
  --set image.tag=dev --set image.pullPolicy=Never \
  --wait --timeout "$TIMEOUT"
kubectl wait --for=condition=Established --timeout=60s \
  crd/clusters.ratchet.dev crd/deployments.ratchet.dev crd/subscriptions.ratchet.dev

log "creating the test Cluster (bundled PostgreSQL)"
kubectl apply --server-side -f operator/samples/00-namespace.yaml
sed "s#ghcr.io/ratchet-dev/ratchet-runtime:0.1.0#$RUNTIME_IMAGE#" operator/samples/cluster-bundled.yaml |
  kubectl apply --server-side -f -
kubectl -n "$NS" wait --for=condition=Ready cluster.ratchet.dev/ratchet-test --timeout="$TIMEOUT"
kubectl -n "$NS" get cluster.ratchet.dev ratchet-test -o wide

log "deploying the greeter service and registering it"
kubectl apply --server-side -f test/e2e/kind/greeter.yaml
kubectl -n "$NS" rollout status deployment.apps/greeter --timeout="$TIMEOUT"
kubectl apply --server-side -f operator/samples/deployment-service-ref.yaml
kubectl -n "$NS" wait --for=condition=Ready deployment.ratchet.dev/greeter --timeout="$TIMEOUT"
kubectl -n "$NS" get deployment.ratchet.dev greeter -o wide

log "invoking Greeter/greet through the ingress"
TOKEN="$(kubectl -n "$NS" get secret ratchet-test-token -o jsonpath='{.data.token}' | base64 -d)"
[ -n "$TOKEN" ] || { echo "the Secret ratchet-test-token has no token" >&2; exit 1; }
# status.endpoints.ingress is http://<service>.<namespace>.svc.<domain>:<port>; fall back to the operator's naming.
INGRESS="$(kubectl -n "$NS" get cluster.ratchet.dev ratchet-test -o jsonpath='{.status.endpoints.ingress}')"
HOSTPORT="${INGRESS#*://}"
HOSTPORT="${HOSTPORT%%/*}"
SERVICE="${HOSTPORT%%.*}"
PORT="${HOSTPORT##*:}"
[ -n "$INGRESS" ] || { SERVICE=ratchet-test-ingress; PORT=8080; }
# Port 0: kubectl picks a free local port and says which (other processes may hold 8080).
kubectl -n "$NS" port-forward "svc/$SERVICE" ":$PORT" >"$WORK/port-forward.log" 2>&1 &
PF_PID=$!
LOCAL_PORT=""
for _ in $(seq 1 60); do
  LOCAL_PORT="$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$WORK/port-forward.log" | head -n 1)"
  [ -n "$LOCAL_PORT" ] && break
  kill -0 "$PF_PID" 2>/dev/null || { cat "$WORK/port-forward.log" >&2; exit 1; }
  sleep 1
done
[ -n "$LOCAL_PORT" ] || { echo "port-forward did not start" >&2; cat "$WORK/port-forward.log" >&2; exit 1; }

RESPONSE="$(curl -fsS --retry 10 --retry-all-errors --retry-delay 2 \
  -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
  --data '"kind"' "http://127.0.0.1:$LOCAL_PORT/Greeter/greet")"
echo "response: $RESPONSE"
[ "$RESPONSE" = '"Hello, kind!"' ] || { echo "unexpected response (want \"Hello, kind!\")" >&2; exit 1; }

UNAUTHORIZED="$(curl -s -o /dev/null -w '%{http_code}' -H 'content-type: application/json' \
  --data '"kind"' "http://127.0.0.1:$LOCAL_PORT/Greeter/greet")"
[ "$UNAUTHORIZED" = 401 ] || { echo "a request without token got $UNAUTHORIZED, want 401" >&2; exit 1; }

log "deleting the registration (the finalizer must let go)"
kubectl -n "$NS" delete deployment.ratchet.dev/greeter --timeout=5m

log "passed"
