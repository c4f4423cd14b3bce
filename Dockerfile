# conch's image: the daemon on Debian bookworm-slim with the shells and
# interpreters its sessions and code contexts run (scripts/packages.txt, the
# list scripts/test installs), as a non-root user in /workspace.
#
#   docker build -t conch .
#   docker run -p 127.0.0.1:7070:7070 -e CONCH_TOKEN=... conch
#
# Where no registry is reachable, scripts/image builds the base from Debian's
# packages (BASE) and the binary on the host (BINARY=prebuilt).

# BASE is the image the daemon runs on; GO_IMAGE the toolchain that builds it.
ARG BASE=debian:bookworm-slim
ARG GO_IMAGE=golang:1.26-bookworm
# BINARY is the stage the binary comes from: build (with GO_IMAGE), or
# prebuilt (.image/conch in the build context, a static binary).
ARG BINARY=build

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/conch ./cmd/conch

FROM scratch AS prebuilt
COPY .image/conch /out/conch

# A stage of no instruction but its FROM is left behind by buildah bud
# (1.28): its working container and the image of the stage before it stay
# in the store after every build. One instruction lets buildah commit and
# remove them as it does every other stage's.
FROM ${BINARY} AS binary
LABEL sh.conch.stage=binary

FROM ${BASE}
COPY scripts/packages.txt /tmp/packages.txt
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates $(awk '!/^#/ && NF { print $1 }' /tmp/packages.txt) \
 && rm -rf /var/lib/apt/lists/* /tmp/packages.txt \
 && useradd --uid 10001 --user-group --create-home --shell /bin/bash conch \
 && install -d -o conch -g conch /workspace
COPY --from=binary /out/conch /usr/local/bin/conch
USER 10001:10001
WORKDIR /workspace
EXPOSE 7070
ENTRYPOINT ["conch"]
CMD ["serve", "--listen", "0.0.0.0:7070"]
