// Command validate checks rendered Kubernetes manifests (the output of `helm template`) against
// the Kubernetes API types: every document must name an apiVersion and kind this program knows,
// and must decode strictly into that type, so an unknown, misspelled or duplicated field fails
// the check instead of being dropped by the API server. Usage:
//
//	helm template ... | validate          # or: validate manifest.yaml ...
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// Only stable (GA) API versions are known: a chart that renders a beta or removed version, or a
// custom resource, fails here and must be looked at by a person. One custom resource is known:
// the Prometheus Operator's monitoring.coreos.com/v1 (the chart's ServiceMonitors), decoded
// strictly into the operator's own Go types.
var groups = []func(*runtime.Scheme) error{
	monitoringv1.AddToScheme,
	corev1.AddToScheme,
	appsv1.AddToScheme,
	autoscalingv2.AddToScheme,
	policyv1.AddToScheme,
	networkingv1.AddToScheme,
	rbacv1.AddToScheme,
	batchv1.AddToScheme,
}

var sourceComment = regexp.MustCompile(`(?m)^# Source: (.+)$`)

func main() {
	scheme := runtime.NewScheme()
	for _, add := range groups {
		if err := add(scheme); err != nil {
			fmt.Fprintln(os.Stderr, "validate:", err)
			os.Exit(2)
		}
	}
	decoder := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})

	inputs := map[string]io.Reader{}
	names := os.Args[1:]
	if len(names) == 0 {
		names = []string{"-"}
		inputs["-"] = os.Stdin
	}
	objects, failures := 0, 0
	seen := map[string]string{}
	for _, name := range names {
		input := inputs[name]
		if input == nil {
			file, err := os.Open(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, "validate:", err)
				os.Exit(2)
			}
			defer file.Close()
			input = file
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(input))
		for index := 1; ; index++ {
			document, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: document %d: %v\n", name, index, err)
				failures++
				break
			}
			where := fmt.Sprintf("%s: document %d", name, index)
			if match := sourceComment.FindSubmatch(document); match != nil {
				where = fmt.Sprintf("%s (%s)", where, match[1])
			}
			if isEmpty(document) {
				continue
			}
			identity, err := check(decoder, document)
			if err == nil {
				if previous, found := seen[identity]; found {
					err = fmt.Errorf("%s is rendered twice (first in %s)", identity, previous)
				}
				seen[identity] = where
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", where, err)
				failures++
				continue
			}
			objects++
		}
	}
	if failures > 0 {
		fmt.Fprintf(os.Stderr, "validate: %d of %d objects failed\n", failures, objects+failures)
		os.Exit(1)
	}
	if objects == 0 {
		fmt.Fprintln(os.Stderr, "validate: no objects found")
		os.Exit(1)
	}
	fmt.Printf("validate: %d objects decode strictly into their Kubernetes types\n", objects)
}

// check decodes one document into the typed object of its apiVersion and kind and returns
// "Kind/name" for it.
func check(decoder runtime.Decoder, document []byte) (string, error) {
	// The YAML itself first: duplicate keys are an error here, not "the last one wins".
	if _, err := sigsyaml.YAMLToJSONStrict(document); err != nil {
		return "", fmt.Errorf("invalid YAML: %w", err)
	}
	object, gvk, err := decoder.Decode(document, nil, nil)
	if err != nil {
		if gvk != nil && runtime.IsNotRegisteredError(err) {
			return "", fmt.Errorf("unknown kind %s %s (not a stable Kubernetes API type)", gvk.GroupVersion(), gvk.Kind)
		}
		return "", err
	}
	accessor, ok := object.(metav1.Object)
	if !ok {
		return "", fmt.Errorf("%s is not an object with metadata", gvk.Kind)
	}
	if accessor.GetName() == "" {
		return "", fmt.Errorf("%s has no metadata.name", gvk.Kind)
	}
	return gvk.Kind + "/" + accessor.GetName(), nil
}

// isEmpty: only comments and blank lines (a template that rendered nothing).
func isEmpty(document []byte) bool {
	for _, line := range bytes.Split(document, []byte("\n")) {
		trimmed := strings.TrimSpace(string(line))
		if trimmed != "" && !strings.HasPrefix(trimmed, "#") && trimmed != "---" {
			return false
		}
	}
	return true
}
