#!/usr/bin/env bash
# Makes sure PostgreSQL (127.0.0.1:5432) and RabbitMQ (127.0.0.1:5672) answer, starting
# the local ones when they are installed but stopped. Under CI=true a service that stays
# unreachable fails the run; otherwise the tests that need it print "skipped".
set -uo pipefail

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() {
  local port=$1 name=$2
  for _ in $(seq 1 60); do
    up "$port" && return 0
    sleep 1
  done
  echo "ensure-services: $name is not reachable on 127.0.0.1:$port" >&2
  return 1
}

status=0
if ! up 5432; then
  if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    echo "ensure-services: starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
  fi
  wait_for 5432 PostgreSQL || status=1
fi
if ! up 5672; then
  if command -v rabbitmq-server >/dev/null; then
    echo "ensure-services: starting RabbitMQ"
    rabbitmq-server -detached || true
  fi
  wait_for 5672 RabbitMQ || status=1
fi
if [ "$status" -ne 0 ] && [ "${CI:-}" = "true" ]; then
  echo "ensure-services: CI=true and a required service is down" >&2
  exit 1
fi
exit 0
