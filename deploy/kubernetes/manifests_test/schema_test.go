// Package manifests checks the Kubernetes manifests of
// deploy/kubernetes: each one decodes strictly into its API types (the
// Kubernetes ones, or for agent-sandbox's resources the schema of the CRD
// that defines them), and what they say of conch — flags, ports, probes —
// is what the conch binary built from this tree takes and serves.
package manifests

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"sigs.k8s.io/yaml"
)

// schema is the part of a CRD's OpenAPI v3 schema that a strict decode
// needs.
type schema struct {
	Type                 string             `json:"type"`
	Properties           map[string]*schema `json:"properties"`
	Items                *schema            `json:"items"`
	Required             []string           `json:"required"`
	Enum                 []any              `json:"enum"`
	AdditionalProperties *additional        `json:"additionalProperties"`
	PreserveUnknown      bool               `json:"x-kubernetes-preserve-unknown-fields"`
	IntOrString          bool               `json:"x-kubernetes-int-or-string"`
}

// additional is additionalProperties: a schema, or true.
type additional struct {
	schema
	Allowed bool
}

func (a *additional) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "true":
		a.Allowed = true
		return nil
	case "false":
		return nil
	}
	a.Allowed = true
	return json.Unmarshal(b, &a.schema)
}

// crd is what the test reads of a CustomResourceDefinition.
type crd struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		Versions []struct {
			Name   string `json:"name"`
			Served bool   `json:"served"`
			Schema struct {
				OpenAPIV3Schema *schema `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// loadCRDs reads the CRDs in dir and returns the schema of each served
// apiVersion and kind ("group/version Kind").
func loadCRDs(dir string) (map[string]*schema, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	schemas := make(map[string]*schema)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var c crd
		if err := yaml.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, v := range c.Spec.Versions {
			if v.Served && v.Schema.OpenAPIV3Schema != nil {
				schemas[c.Spec.Group+"/"+v.Name+" "+c.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	return schemas, nil
}

// validate checks v, decoded from JSON, against s as the API server's
// strict field validation would: no unknown field (unless the schema keeps
// them), every required field, each value of its type and enum. The
// object's metadata is the API server's own, left to the caller.
func validate(path string, v any, s *schema) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{path}, args...)...))
	}
	if s.IntOrString {
		switch v.(type) {
		case string, float64:
		default:
			fail("want an integer or a string, got %T", v)
		}
		return errs
	}
	if len(s.Enum) > 0 && !slices.Contains(s.Enum, v) {
		fail("%v is not one of %v", v, s.Enum)
	}
	switch s.Type {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			fail("want an object, got %T", v)
			return errs
		}
		for _, r := range s.Required {
			if _, ok := m[r]; !ok {
				fail("required field %q is missing", r)
			}
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := path + "." + k
			switch sub, known := s.Properties[k]; {
			case path == "" && k == "metadata":
			case known:
				errs = append(errs, validate(p, m[k], sub)...)
			case s.AdditionalProperties != nil && s.AdditionalProperties.Allowed:
				if s.AdditionalProperties.Type != "" {
					errs = append(errs, validate(p, m[k], &s.AdditionalProperties.schema)...)
				}
			case s.PreserveUnknown:
			default:
				errs = append(errs, fmt.Errorf("%s: unknown field", p))
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			fail("want an array, got %T", v)
			return errs
		}
		for i, e := range a {
			if s.Items != nil {
				errs = append(errs, validate(fmt.Sprintf("%s[%d]", path, i), e, s.Items)...)
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			fail("want a string, got %T", v)
		}
	case "integer":
		if f, ok := v.(float64); !ok || f != math.Trunc(f) {
			fail("want an integer, got %v", v)
		}
	case "number":
		if _, ok := v.(float64); !ok {
			fail("want a number, got %T", v)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			fail("want a boolean, got %T", v)
		}
	}
	return errs
}
