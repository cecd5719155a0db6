# syntax=docker/dockerfile:1
#
# payrecon's one binary, `reconciler`, in a distroless image.
#
#   docker build -t payrecon/reconciler:dev .
#   docker run --rm payrecon/reconciler:dev --help
#
# BuildKit (the default builder since Docker 23) is needed for the cache mounts and the
# automatic TARGETOS/TARGETARCH arguments; `docker buildx build --platform linux/amd64,linux/arm64`
# cross-compiles on the build host, which works because the binary is pure Go (CGO off).
#
# Time zones: config imports time/tzdata, so RECONCILER_TIMEZONE (default Asia/Shanghai)
# resolves from the zone database compiled into the binary. Nothing here sets TZ or relies on
# /usr/share/zoneinfo, so the final stage could be `scratch` as well.

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
ENV CGO_ENABLED=0
# Dependencies first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w" -o /out/reconciler ./cmd/reconciler

# distroless/static: CA certificates (the platforms are HTTPS), /etc/passwd with `nonroot`,
# no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="payrecon reconciler" \
      org.opencontainers.image.description="Payment reconciliation worker for Alipay and WeChat Pay"
COPY --from=build /out/reconciler /reconciler
# Numeric, so that Kubernetes' runAsNonRoot can verify it (a user NAME cannot be checked).
# 65532 is distroless's `nonroot`.
USER 65532:65532
# serve: callbacks, /healthz, /readyz, /metrics (RECONCILER_LISTEN, default :8080).
EXPOSE 8080
ENTRYPOINT ["/reconciler"]
# The CronJob entry point; override with serve, backfill, migrate, ...
CMD ["run"]
