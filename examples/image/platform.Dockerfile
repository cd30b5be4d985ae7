# syntax=docker/dockerfile:1
#
# A platform's migrations image: the engine image and the platform's tree,
# built in the platform's own repository (its build context), with no engine
# source. ENGINE is the engine image the platform built and pushed
# (examples/image/Dockerfile, or build-oci.sh without a daemon), pinned by
# digest; the tree is the release's, with the manifest the release job
# generated (`migrate manifest --repo . --path migrations --out migrations/order.d`).
#
#   docker build -f platform.Dockerfile --build-arg ENGINE=REGISTRY/migrate-engine@sha256:... -t IMAGE .
#
# The chart's `tree` value (default /migrations) is where `migrate run`
# looks; MIGRATION_TREE names the same path for a shell in the image
# (`migrate lint "$MIGRATION_TREE"`). Pin the pushed IMAGE by digest in the
# chart's `image` value: the ledger records it with each entry.
ARG ENGINE=registry.example/migrate-engine@sha256:0000000000000000000000000000000000000000000000000000000000000000
FROM ${ENGINE}
COPY migrations /migrations
ENV MIGRATION_TREE=/migrations
