#!/usr/bin/env bash
# Makes a database with schema version 21 (the last before environments) by
# driving the real server of that version over HTTP, and records what the
# API answered then, for the upgrade test. Usage: make.sh ROLLOUT_BINARY DB OUTDIR
set -euo pipefail
bin=$1 db=$2 out=$3
port=18931
base=http://127.0.0.1:$port
mkdir -p "$out"
if [[ $db != postgres* ]] && [ ! -e "$db" ]; then
  # Only serve creates a database: create it, then stop.
  "$bin" serve --db "$db" --addr 127.0.0.1:$port & pid=$!
  for i in $(seq 50); do curl -fsS $base/readyz >/dev/null 2>&1 && break; sleep 0.2; done
  kill $pid; wait $pid || true
fi
admin=$("$bin" token create --name fixture-admin --role admin --db "$db" | tail -1)
echo "admin: $admin" >&2
"$bin" serve --db "$db" --addr 127.0.0.1:$port --flush-interval 1s & pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for i in $(seq 50); do curl -fsS $base/readyz >/dev/null 2>&1 && break; sleep 0.2; done
H=(-H "Authorization: Bearer $admin" -H 'Content-Type: application/json')
api() { local m=$1 p=$2; shift 2; curl -sS -X "$m" "${H[@]}" "$base$p" "$@"; echo; }
mk() { api POST /api/tokens -d "{\"name\":\"$1\",\"role\":\"$2\"}" | jq -r .token; }
editor=$(mk fixture-editor editor); viewer=$(mk fixture-viewer viewer); sdk=$(mk fixture-sdk sdk); client=$(mk fixture-client client)
mk fixture-revoked viewer >/dev/null
rid=$(api GET /api/tokens | jq -r '.tokens[] | select(.name=="fixture-revoked") | .id'); api DELETE /api/tokens/$rid
api POST /api/features -d '{"key":"checkout","description":"new checkout","buckets":[{"name":"control","replicas":100,"value":"old"},{"name":"A","replicas":100,"value":"new"},{"name":"B","replicas":100,"value":"newer"}],"overrides":{"alice":"A"}}'
api POST /api/features/checkout/buckets -d '{"name":"C","replicas":100,"value":"newest"}'
api PUT /api/features/checkout/overrides/bob -d '{"bucket":"control"}'
api POST /api/features -d '{"key":"banner","targets":{"on":0.1,"off":0.9},"fallback":"off"}'
api PATCH /api/features/banner -d '{"description":"the spring banner","comment":"describe it"}'
api POST /api/segments -d '{"key":"enterprise","description":"big customers","conditions":[{"attribute":"plan","op":"eq","value":"enterprise"}]}'
api PUT /api/features/banner/rules -d '{"rules":[{"name":"big","conditions":[{"op":"in_segment","value":"enterprise"}],"serve":{"bucket":"on"}},{"name":"beta","conditions":[{"attribute":"email","op":"ends_with","value":"@example.com"},{"attribute":"app_version","op":"semver_gte","value":"4.2.0"}],"serve":{"ring":true}}]}'
api POST /api/features -d '{"key":"old-flag","buckets":[{"name":"on","replicas":10,"value":true},{"name":"off","replicas":10,"value":false}]}'
api POST /api/features/old-flag/archive
api POST /api/features -d '{"key":"dark-mode","enabled":false,"buckets":[{"name":"on","replicas":50,"value":true},{"name":"off","replicas":150,"value":false}]}'
api POST /api/features/dark-mode/ramps -d '{"bucket":"on","steps":[0.3,0.5,1],"every":"24h","start":"2030-01-01T00:00:00Z"}'
api PUT /api/settings -d '{"max_churn":0.2,"require_approval":{"features":["pay"]}}'
api POST /api/features -d '{"key":"pay","tags":["payments"],"owner":"team-pay","buckets":[{"name":"on","replicas":10,"value":true},{"name":"off","replicas":90,"value":false}]}'
curl -sS -X PUT -H "Authorization: Bearer $editor" -H 'Content-Type: application/json' $base/api/features/pay/buckets/on -d '{"replicas":20}'; echo
api POST /api/webhooks -d '{"url":"http://127.0.0.1:9/hook","secret":"s3cret-s3cret-s3cret","events":["*"]}'
# evaluations and exposures
for u in $(seq 1 200); do curl -sS -H "Authorization: Bearer $client" "$base/evaluate?feature=checkout&user=u$u" >/dev/null; done
curl -sS -X POST -H "Authorization: Bearer $sdk" -H 'Content-Type: application/json' $base/api/exposures -d "$(api GET /api/features/checkout | jq -c '{batch:"fixture-batch-1",exposures:[{feature:.key,feature_id:.id,version:.version,bucket:"A",count:7}]}')"; echo
curl -sS -X POST -H "Authorization: Bearer $editor" -H 'Content-Type: application/json' -H 'Idempotency-Key: fixture-key-1' $base/api/features/checkout/buckets/B -X PUT -d '{"replicas":120}'; echo
sleep 2
kill $pid; wait $pid || true
trap - EXIT
# An evaluation, whose count the server flushes as it stops, so that the
# reads below see it.
"$bin" serve --db "$db" --addr 127.0.0.1:$port & pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for i in $(seq 50); do curl -fsS $base/readyz >/dev/null 2>&1 && break; sleep 0.2; done
curl -sS -X POST -H "Authorization: Bearer $client" -H 'Content-Type: application/json' $base/evaluate -d '{"user":"u1","context":{"plan":"enterprise"}}' > "$out/evaluations.json"
kill $pid; wait $pid || true
trap - EXIT
# What the API answers now, read by a fresh server on the same database.
"$bin" serve --db "$db" --addr 127.0.0.1:$port & pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for i in $(seq 50); do curl -fsS $base/readyz >/dev/null 2>&1 && break; sleep 0.2; done
printf '%s\n' "$admin" > "$out/admin-token"
printf '{"editor":"%s","viewer":"%s","sdk":"%s","client":"%s"}\n' "$editor" "$viewer" "$sdk" "$client" > "$out/tokens.json"
get() { curl -sS "${H[@]}" "$base$1"; }
{
  echo '{'
  echo '"features":'; get /api/features; echo ','
  echo '"archived":'; get '/api/features?archived=true'; echo ','
  for k in checkout banner dark-mode pay; do echo "\"versions/$k\":"; get "/api/features/$k/versions?limit=100"; echo ','; done
  echo '"segments":'; get /api/segments; echo ','
  echo '"ramps":'; get /api/ramps; echo ','
  echo '"requests":'; get '/api/requests?limit=100'; echo ','
  echo '"settings":'; get /api/settings; echo ','
  echo '"tokens":'; get /api/tokens; echo ','
  echo '"audit":'; get '/api/audit?limit=500'; echo ','
  echo '"changes":'; get '/api/changes?limit=500'; echo ','
  echo '"webhooks":'; get /api/webhooks; echo ','
  echo '"exposures/checkout":'; get /api/features/checkout/exposures; echo ','
  echo '"export":'; get /api/export; echo ','
  echo '"evaluations":'; cat "$out/evaluations.json"
  echo '}'
} | jq . > "$out/api.json"
rm "$out/evaluations.json"
kill $pid; wait $pid || true
