# syntax=docker/dockerfile:1
# dbcanary: a static binary built by `make build` (the same flags as on a
# workstation) on a distroless, non-root base.
#   docker build --build-arg VERSION=$(git describe --tags --always) --build-arg REVISION=$(git rev-parse HEAD) -t dbcanary .

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
 && ! ldd bin/dbcanary

# distroless/static: CA certificates, tzdata, /etc/passwd with nonroot (65532), no shell.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="dbcanary" \
      org.opencontainers.image.description="Continuous verified canaries for Cassandra, OpenSearch, RabbitMQ and S3, exported to Prometheus" \
      org.opencontainers.image.source="https://github.com/dbcanary/dbcanary" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION"
COPY --from=build /src/bin/dbcanary /usr/local/bin/dbcanary
USER 65532:65532
EXPOSE 19190
ENTRYPOINT ["/usr/local/bin/dbcanary"]
CMD ["run", "--config.file=/etc/dbcanary/dbcanary.yaml"]
