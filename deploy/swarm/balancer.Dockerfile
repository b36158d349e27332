# The balancer of the Swarm stack and of the Kubernetes manifests: Debian's HAProxy with
# deploy/haproxy.cfg, the file serve_replicas.py runs, its servers filled in as DNS templates.
# OPENENV_REPLICAS and MCP_REPLICAS name a DNS name that answers with the address of each
# running replica (Swarm's tasks.SERVICE, a Kubernetes headless Service); HAProxy asks every
# second, so scaling the replicas needs no change here. Build it from the deploy folder:
#   docker build -f deploy/swarm/balancer.Dockerfile -t sqlenv-balancer deploy
FROM debian:bookworm-slim

# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy \
 && rm -rf /var/lib/apt/lists/*

ENV OPENENV_REPLICAS=tasks.openenv MCP_REPLICAS=tasks.mcp
COPY haproxy.cfg swarm/resolvers.cfg /etc/haproxy/
# Up to 16 replicas of each kind; a slot with no replica behind it is down and gets no traffic.
# HAProxy reads ${...} from its environment when it starts.
# hadolint ignore=SC2016
RUN sed -i \
    -e 's/@OPENENV_BIND@/:8000/' \
    -e 's/@MCP_BIND@/:8001/' \
    -e 's/@STATS_BIND@/:8404/' \
    -e 's/@OPENENV_SERVERS@/    server-template openenv 1-16 "${OPENENV_REPLICAS}":8000 resolvers dns init-addr none/' \
    -e 's/@MCP_SERVERS@/    server-template mcp 1-16 "${MCP_REPLICAS}":8000 resolvers dns init-addr none/' \
    /etc/haproxy/haproxy.cfg \
 && haproxy -c -f /etc/haproxy/resolvers.cfg -f /etc/haproxy/haproxy.cfg

# hadolint ignore=DL3066
USER haproxy
EXPOSE 8000 8001 8404
CMD ["haproxy", "-db", "-f", "/etc/haproxy/resolvers.cfg", "-f", "/etc/haproxy/haproxy.cfg"]
