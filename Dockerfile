# syntax=docker/dockerfile:1
# dbcanary for builders with a Docker daemon (or BuildKit) and a registry: the
# static binary built by `make build` (the same flags as on a workstation), on
# the same image as `make image` builds without Docker from
# deploy/image/Containerfile: an empty base with the CA bundle and the non-root
# user 65532 (deploy/image/rootfs.sh), nothing else. Keep the final stage
# identical to the Containerfile's (test/deploy/image_layout_test.go and
# TestImage in test/deploy/image_integration_test.go check it).
#   docker build --build-arg VERSION=$(git describe --tags --always) --build-arg REVISION=$(git rev-parse HEAD) -t dbcanary .
# The release images are not built here but by .github/workflows/release.yml,
# from the goreleaser binaries with deploy/image/build.sh (docs/release.md).

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Module downloads are cached in their own layer, invalidated only by go.mod/go.sum.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# .git is not in the build context, so version and revision come as arguments.
ARG VERSION=dev
ARG REVISION=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    make build VERSION="$VERSION" REVISION="$REVISION" \
 && ! ldd bin/dbcanary \
 && bash deploy/image/rootfs.sh /image/rootfs

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="dbcanary" \
      org.opencontainers.image.description="Continuous verified canaries for Cassandra, OpenSearch, RabbitMQ and S3, exported to Prometheus" \
      org.opencontainers.image.source="https://github.com/dbcanary/dbcanary" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"
COPY --from=build /image/rootfs/ /
COPY --from=build /src/bin/dbcanary /usr/local/bin/dbcanary
USER 65532:65532
EXPOSE 19190
ENTRYPOINT ["/usr/local/bin/dbcanary"]
CMD ["run", "--config.file=/etc/dbcanary/dbcanary.yaml"]
