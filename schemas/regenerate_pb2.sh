#!/bin/sh
# Regenerate schemas/perfetto_subset_pb2.py from schemas/perfetto_subset.proto.
#
# protoc 26.1 (grpcio-tools 1.64) writes code for protobuf >= 5.26.1, the oldest runtime
# tracekit supports; newer runtimes load it too. grpcio-tools pins protobuf < 6, so it gets a
# throwaway virtual environment instead of tracekit's own.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools"
"$tools/bin/pip" install --quiet "grpcio-tools==1.64.3"
cd "$here"
"$tools/bin/python" -m grpc_tools.protoc -I. --python_out=. perfetto_subset.proto
# Generated code is not held to the project's lint rules.
printf '%s\n' '# ruff: noqa' | cat - perfetto_subset_pb2.py > "$tools/pb2" \
    && mv "$tools/pb2" perfetto_subset_pb2.py
echo "wrote $here/perfetto_subset_pb2.py"
