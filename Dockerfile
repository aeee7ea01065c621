# The stickypack extender's image (charts/stickypack, extender.image), which the chart's
# webhook runs too (webhook.image defaults to it). Not built or published by CI: build and
# push it yourself (docs/helm.md):
#   docker build -t <registry>/stickypack:0.1.0 .
FROM python:3.12-slim

WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY src ./src
RUN pip install --no-cache-dir . && rm -rf /src

WORKDIR /
# Any non-root user; the chart runs it as 65534 (nobody) with a read-only root filesystem.
USER 65534:65534
EXPOSE 8888
ENTRYPOINT ["stickypack"]
CMD ["extender", "--config", "/etc/stickypack/extender.yaml"]
