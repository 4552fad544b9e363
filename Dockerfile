# The same image as `make image` (hack/image), for those who build with Docker:
#   docker buildx build --platform linux/amd64,linux/arm64 -t ghcr.io/netpool/netpool:dev .
# hack/image's test checks that this file copies the same binaries, with the same user and
# entrypoint, as the image make image writes.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS TARGETARCH
WORKDIR /src
COPY . .
RUN for b in netpool netpool-agent netpool-controller netpool-egress-router netpoolctl; do \
      CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false -ldflags "-s -w" -o /out/$b ./cmd/$b || exit 1; \
    done

FROM scratch
COPY --from=build /out/netpool /netpool
COPY --from=build /out/netpool-agent /netpool-agent
COPY --from=build /out/netpool-controller /netpool-controller
COPY --from=build /out/netpool-egress-router /netpool-egress-router
COPY --from=build /out/netpoolctl /netpoolctl
USER 65532:65532
ENTRYPOINT ["/netpoolctl"]
