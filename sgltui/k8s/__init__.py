"""Kubernetes manifests for sgltui (`sgltui k8s render`, `sgltui profiles export --ome`)."""
