#!/bin/sh
# Generate the Nomad plugin protos' Go code, build nomadhost and run it against a plugin
# binary: `run.sh <plugin binary> <work dir>`. Everything goes under the work dir (the
# GOPATH with the generated code, Go's build cache, the host binary), so a second run
# reuses the build. Go, protoc and the libraries are Debian's (debian-packages.txt):
# GOPATH mode, no network.
set -eu

plugin=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)
protos=$(cd "$here/../../../nomad-plugin/proto" && pwd)

mkdir -p "$work"
work=$(cd "$work" && pwd)
export GO111MODULE=off GOPROXY=off GOFLAGS=
export GOPATH="$work/gopath:/usr/share/gocode"
export GOCACHE="$work/cache"

# The Nomad services and the messages they use, as Go packages under nomadproto/. The
# go-plugin protos (package `plugin`) are left out: go-plugin has its own, registered
# under the same names. So is google/rpc/status.proto, which grpc's genproto package
# registers already.
gen=$work/gopath/src/nomadproto
p=nomadproto
map="Mplugins/base/proto/base.proto=$p/base"
map="$map,Mplugins/drivers/proto/driver.proto=$p/drivers"
map="$map,Mplugins/shared/hclspec/hcl_spec.proto=$p/hclspec"
for f in attribute stats recoverable_error; do
    map="$map,Mplugins/shared/structs/proto/$f.proto=$p/structs"
done
# Go's build cache keys on file contents, and protoc's output is the same each time, so
# regenerating does not cost a rebuild.
rm -rf "$gen"
mkdir -p "$work/gopath/src"
(
    cd "$protos"
    protoc -I . -I /usr/include \
        --go_out="$work/gopath/src" --go_opt="$map" \
        --go-grpc_out="$work/gopath/src" --go-grpc_opt="$map" \
        plugins/base/proto/base.proto \
        plugins/drivers/proto/driver.proto \
        plugins/shared/hclspec/hcl_spec.proto \
        plugins/shared/structs/proto/attribute.proto \
        plugins/shared/structs/proto/stats.proto \
        plugins/shared/structs/proto/recoverable_error.proto
)

(cd "$here" && go build -o "$work/nomadhost" .)
exec "$work/nomadhost" "$plugin"
