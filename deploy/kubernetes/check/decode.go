package check

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kinds are the objects the manifests and the chart may hold, by
// apiVersion/kind: anything else is an error.
var kinds = map[string]func() any{
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                               func() any { return &corev1.Secret{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/Pod":                                  func() any { return &corev1.Pod{} },
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PodMonitor":     func() any { return &monitoringv1.PodMonitor{} },
}

// object is one decoded document.
type object struct {
	source string // file, and the document's number in it
	kind   string
	name   string
	obj    any
}

// decodeAll decodes every document of data strictly: a field the type does
// not have, or a field given twice, is an error, as a kind not in kinds is.
func decodeAll(source string, data []byte) ([]object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []object
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		src := fmt.Sprintf("%s (document %d)", source, i)
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		if len(m) == 0 { // comments only
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		kind := tm.APIVersion + "/" + tm.Kind
		newObj := kinds[kind]
		if newObj == nil {
			return nil, fmt.Errorf("%s: unexpected kind %q", src, kind)
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", src, kind, err)
		}
		meta := obj.(metav1.Object)
		if errs := validation.IsDNS1123Subdomain(meta.GetName()); len(errs) > 0 {
			return nil, fmt.Errorf("%s: name %q: %s", src, meta.GetName(), strings.Join(errs, "; "))
		}
		objs = append(objs, object{source: src, kind: tm.Kind, name: meta.GetName(), obj: obj})
	}
}

// set is the objects one deployment applies together.
type set []object

func (s set) find(kind, name string) any {
	for _, o := range s {
		if o.kind == kind && o.name == name {
			return o.obj
		}
	}
	return nil
}

func (s set) all(kind string) []any {
	var out []any
	for _, o := range s {
		if o.kind == kind {
			out = append(out, o.obj)
		}
	}
	return out
}
