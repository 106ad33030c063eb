#!/usr/bin/env bash
# Prints `export VAR=...` lines that give deploy/local/dbcanary.yaml its
# secrets from the local stack's generated credential files.
STACK_DIR=${DBCANARY_STACK_DIR:-/var/tmp/dbcanary-stack}
f=$STACK_DIR/rabbitmq/password; [ -f "$f" ] && echo "export DBCANARY_RABBITMQ_PASSWORD=$(cat "$f")"
exit 0
