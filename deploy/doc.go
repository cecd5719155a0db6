// Package deploy holds payrecon's deployment artefacts: the Kubernetes manifests under
// kubernetes/ (see kubernetes/README.md), checked together with the Dockerfile at the
// repository root by this package's tests. It has no code of its own: `go test ./deploy/`
// decodes every manifest strictly into the Kubernetes API types, so a misspelt field, a
// setting the binary does not know or a broken cross-reference fails CI before a cluster
// ever sees it.
package deploy
