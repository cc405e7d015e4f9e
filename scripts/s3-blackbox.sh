#!/usr/bin/env bash
# Black-box test of the S3 gateway with real S3 tools: the AWS CLI (`aws s3 cp/ls/sync/rm`,
# `aws s3api ...`, a multipart upload by `aws s3 cp` of a large file) and boto3, against a
# real dev cluster started by `rozone dev up --detach` (its gateway included).
#
#   scripts/s3-blackbox.sh [--bin-dir DIR]     (default $CARGO_TARGET_DIR/debug)
#
# Needs `aws` and python3 with boto3 (Debian: apt-get install awscli python3-boto3).
set -euo pipefail

bin_dir=${CARGO_TARGET_DIR:-$HOME/.cache/rozone/target}/debug
[ "${1:-}" = --bin-dir ] && bin_dir=${2:?--bin-dir needs a directory}
command -v aws >/dev/null || { echo "s3-blackbox: aws not found (apt-get install awscli)" >&2; exit 1; }
# The python3 on PATH may be another install than Debian's (pyenv): use one that has boto3.
py=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c 'import boto3' 2>/dev/null; then py=$p; break; fi
done
[ -n "$py" ] || { echo "s3-blackbox: no python3 with boto3 (apt-get install python3-boto3)" >&2; exit 1; }

rozone=$bin_dir/rozone
dir=$(mktemp -d)
cleanup() {
    # The cluster's own directory: `dev down` of its parent finds no pids.json and stops
    # nothing (every run used to leave its daemons running).
    "$rozone" dev down --dir "$dir/cluster" >/dev/null 2>&1 || true
    rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "s3-blackbox: FAIL: $*" >&2; exit 1; }

"$rozone" --json dev up --detach --dir "$dir/cluster" --scms 1 --oms 1 --datanodes 3 \
    --bin-dir "$bin_dir" --ready-timeout 120s >"$dir/up.json" || fail "dev up"
endpoint=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["s3_endpoint"])' "$dir/up.json")
[ -n "$endpoint" ] || fail "no s3_endpoint"
creds=$("$rozone" --config "$dir/cluster/client.toml" s3 getsecret --user blackbox)
AWS_ACCESS_KEY_ID=$(sed -n 's/^awsAccessKey=//p' <<<"$creds")
AWS_SECRET_ACCESS_KEY=$(sed -n 's/^awsSecret=//p' <<<"$creds")
export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_DEFAULT_REGION=us-east-1 \
    AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
s3() { aws --endpoint-url "$endpoint" s3 "$@"; }
s3api() { aws --endpoint-url "$endpoint" s3api "$@"; }

s3 mb s3://bbox >/dev/null || fail "aws s3 mb"
head -c 3000000 /dev/urandom >"$dir/small"
head -c $((24 << 20)) /dev/urandom >"$dir/big"   # above the CLI's 8 MiB: a multipart upload
s3 cp "$dir/small" s3://bbox/dir/small >/dev/null || fail "aws s3 cp (put)"
s3 cp "$dir/big" s3://bbox/dir/big >/dev/null || fail "aws s3 cp (multipart put)"
s3 cp s3://bbox/dir/small "$dir/small.back" >/dev/null || fail "aws s3 cp (get)"
s3 cp s3://bbox/dir/big "$dir/big.back" >/dev/null || fail "aws s3 cp (get big)"
cmp -s "$dir/small" "$dir/small.back" || fail "small object read back differs"
cmp -s "$dir/big" "$dir/big.back" || fail "multipart object read back differs"
# Listed into a variable first: `grep -q` quits at the first match, and under pipefail the
# CLI's broken pipe on the lines after it (here `small`) would fail the pipeline.
listing=$(s3 ls s3://bbox/dir/) || fail "aws s3 ls"
grep -q ' big$' <<<"$listing" || fail "aws s3 ls does not list big: $listing"
mkdir "$dir/tree"
for i in 1 2 3; do echo "file $i" >"$dir/tree/f$i"; done
s3 sync "$dir/tree" s3://bbox/tree/ >/dev/null || fail "aws s3 sync"
[ "$(s3 ls s3://bbox/tree/ | wc -l)" = 3 ] || fail "sync did not upload 3 files"
s3api head-object --bucket bbox --key dir/small >/dev/null || fail "s3api head-object"
s3api put-object --bucket bbox --key once --body "$dir/tree/f1" --if-none-match '*' >/dev/null 2>&1 ||
    fail "s3api put-object --if-none-match * on a new key"
if s3api put-object --bucket bbox --key once --body "$dir/tree/f2" --if-none-match '*' >/dev/null 2>"$dir/err"; then
    fail "a second If-None-Match: * put succeeded"
fi
grep -q PreconditionFailed "$dir/err" || fail "want PreconditionFailed, got: $(cat "$dir/err")"

"$py" - "$endpoint" <<'PY' || fail "boto3"
import sys, hashlib, boto3, botocore
s3 = boto3.client("s3", endpoint_url=sys.argv[1],
                  config=botocore.config.Config(s3={"addressing_style": "path"}))
s3.put_object(Bucket="bbox", Key="py/k", Body=b"hello boto3", ContentType="text/x-py",
              Metadata={"who": "boto3"})
h = s3.head_object(Bucket="bbox", Key="py/k")
assert h["ContentType"] == "text/x-py", h
assert h["Metadata"] == {"who": "boto3"}, h
assert h["ETag"] == '"%s"' % hashlib.md5(b"hello boto3").hexdigest(), h
assert s3.get_object(Bucket="bbox", Key="py/k", Range="bytes=6-")["Body"].read() == b"boto3"
r = s3.list_objects_v2(Bucket="bbox", Delimiter="/")
assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["dir/", "py/", "tree/"], r
url = s3.generate_presigned_url("get_object", Params={"Bucket": "bbox", "Key": "py/k"}, ExpiresIn=60)
import urllib.request
assert urllib.request.urlopen(url).read() == b"hello boto3"
try:
    s3.get_object(Bucket="bbox", Key="nokey")
    raise SystemExit("NoSuchKey expected")
except botocore.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] == "NoSuchKey", e.response
print("boto3 OK")
PY

s3 rm s3://bbox --recursive >/dev/null || fail "aws s3 rm --recursive"
s3 rb s3://bbox >/dev/null || fail "aws s3 rb"
echo "PASS: aws s3 cp/ls/sync/rm/rb, s3api, multipart, conditional put and boto3 against the gateway"
