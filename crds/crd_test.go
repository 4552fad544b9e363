package crds_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// loadCRD reads and decodes one generated CRD from crds/bases.
func loadCRD(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("bases", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatalf("decoding %s: %v", file, err)
	}
	return &crd
}

// column is a printer column as `kubectl get` shows it.
type column struct {
	name, jsonPath, typ string
	priority            int32
}

func TestCRDs(t *testing.T) {
	tests := []struct {
		file       string
		kind       string
		shortNames []string
		status     bool
		columns    []column
	}{
		{
			file: "ipam.netpool.io_ippools.yaml", kind: "IPPool", shortNames: []string{"nppool", "ipp"}, status: true,
			columns: []column{
				{"Range", ".spec.range", "string", 0},
				{"Capacity", ".status.capacity", "string", 0},
				{"Used", ".status.allocated", "integer", 0},
				{"Free", ".status.free", "string", 0},
				{"Ready", `.status.conditions[?(@.type=="Ready")].status`, "string", 0},
				{"Network", ".spec.networkName", "string", 1},
				{"Age", ".metadata.creationTimestamp", "date", 0},
			},
		},
		{
			file: "ipam.netpool.io_overlappingrangeipreservations.yaml", kind: "OverlappingRangeIPReservation", shortNames: []string{"npres", "orir"},
			columns: []column{
				{"Address", ".spec.address", "string", 0},
				{"Pool", ".spec.pool", "string", 0},
				{"Node", ".spec.node", "string", 0},
				{"Pod", ".spec.podRef", "string", 0},
				{"Container", ".spec.containerID", "string", 1},
				{"Interface", ".spec.ifName", "string", 1},
				{"Age", ".metadata.creationTimestamp", "date", 0},
			},
		},
		{
			file: "ipam.netpool.io_ippoolslices.yaml", kind: "IPPoolSlice", shortNames: []string{"npslice"},
			columns: []column{
				{"Pool", ".spec.pool", "string", 0},
				{"Range", ".spec.range", "string", 0},
				{"Node", ".spec.node", "string", 0},
				{"Age", ".metadata.creationTimestamp", "date", 0},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			crd := loadCRD(t, tt.file)
			if crd.Spec.Group != "ipam.netpool.io" || crd.Spec.Names.Kind != tt.kind {
				t.Fatalf("group %q kind %q, want ipam.netpool.io %s", crd.Spec.Group, crd.Spec.Names.Kind, tt.kind)
			}
			if crd.Spec.Scope != apiextensionsv1.ClusterScoped {
				t.Errorf("scope %q, want Cluster", crd.Spec.Scope)
			}
			if !slices.Equal(crd.Spec.Names.Categories, []string{"netpool"}) {
				t.Errorf("categories %q, want [netpool]", crd.Spec.Names.Categories)
			}
			if !slices.Equal(crd.Spec.Names.ShortNames, tt.shortNames) {
				t.Errorf("short names %q, want %q", crd.Spec.Names.ShortNames, tt.shortNames)
			}
			if len(crd.Spec.Versions) != 1 {
				t.Fatalf("%d versions, want 1", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			if v.Name != "v1alpha1" || !v.Served || !v.Storage {
				t.Errorf("version %s served=%t storage=%t, want v1alpha1 served and stored", v.Name, v.Served, v.Storage)
			}
			if hasStatus := v.Subresources != nil && v.Subresources.Status != nil; hasStatus != tt.status {
				t.Errorf("status subresource %t, want %t", hasStatus, tt.status)
			}
			var got []column
			for _, c := range v.AdditionalPrinterColumns {
				got = append(got, column{c.Name, c.JSONPath, c.Type, c.Priority})
			}
			if !slices.Equal(got, tt.columns) {
				t.Errorf("printer columns\n got %+v\nwant %+v", got, tt.columns)
			}
			for _, problem := range checkRules(v.Schema.OpenAPIV3Schema, "") {
				t.Error(problem)
			}
		})
	}
}

// checkRules walks a schema and reports every CEL rule without a message (the default message
// quotes the rule, which tells a user nothing) and every string field without a maximum length
// in spec or status (the apiserver estimates a rule's cost from it), leaving out the metav1 types.
// An enum bounds a string as well (the estimate takes its longest value), and without a maxLength
// beside it a value outside the enum is told the supported values, not a length.
func checkRules(s *apiextensionsv1.JSONSchemaProps, path string) []string {
	if s == nil {
		return nil
	}
	var problems []string
	for _, r := range s.XValidations {
		if r.Message == "" && r.MessageExpression == "" {
			problems = append(problems, fmt.Sprintf("%s: rule %q has no message", path, r.Rule))
		}
	}
	ours := strings.HasPrefix(path, ".spec") || strings.HasPrefix(path, ".status")
	// metav1 types: selectors, conditions, and times (metav1.Time, a date-time string)
	fromMeta := strings.Contains(path, "Selector") || strings.Contains(path, ".conditions") || s.Format == "date-time"
	if s.Type == "string" && s.MaxLength == nil && len(s.Enum) == 0 && ours && !fromMeta {
		problems = append(problems, fmt.Sprintf("%s: string without maxLength", path))
	}
	for name, p := range s.Properties {
		problems = append(problems, checkRules(&p, path+"."+name)...)
	}
	if s.Items != nil {
		problems = append(problems, checkRules(s.Items.Schema, path+"[]")...)
	}
	return problems
}

func TestCheckRules(t *testing.T) {
	maxLen := int64(10)
	spec := apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"nodeSelector": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"key": {Type: "string"}}},
			"a":            {Type: "string", MaxLength: &maxLen, XValidations: apiextensionsv1.ValidationRules{{Rule: "self != ''"}}},
			"b":            {Type: "string"},
			"e":            {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"A"`)}}},
			"c":            {Type: "string", MaxLength: &maxLen, XValidations: apiextensionsv1.ValidationRules{{Rule: "true", Message: "fine"}}},
			"l":            {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
		},
	}
	s := &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"kind": {Type: "string"},
			"spec": spec,
			"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"conditions": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
				"phase":      {Type: "string", XValidations: apiextensionsv1.ValidationRules{{Rule: "true", MessageExpression: "'x'"}}},
			}},
		},
	}
	got := checkRules(s, "")
	slices.Sort(got)
	want := []string{
		`.spec.a: rule "self != ''" has no message`,
		".spec.b: string without maxLength",
		".spec.l[]: string without maxLength",
		".status.phase: string without maxLength",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("checkRules = %q, want %q", got, want)
	}
}

// TestEgressRouterCRD pins what `kubectl get egressrouters` shows and how the kind is served.
func TestEgressRouterCRD(t *testing.T) {
	crd := loadCRD(t, "network.netpool.io_egressrouters.yaml")
	if crd.Spec.Group != "network.netpool.io" || crd.Spec.Names.Kind != "EgressRouter" {
		t.Fatalf("group %q kind %q, want network.netpool.io EgressRouter", crd.Spec.Group, crd.Spec.Names.Kind)
	}
	if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("scope %q, want Namespaced", crd.Spec.Scope)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions, want 1", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1" || !v.Served || !v.Storage || v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("version %s served=%t storage=%t, want v1 served and stored with a status subresource", v.Name, v.Served, v.Storage)
	}
	// A column shows the first value its path finds, so each address has a column, and Reason is
	// the first reason that is not AsExpected in the order the reconciler keeps (Degraded,
	// Progressing, Available); controller's TestEgressRouterColumns reads them from a real API server.
	want := []column{
		{"Address", ".status.addresses[0].ip", "string", 0},
		{"Available", `.status.conditions[?(@.type=="Available")].status`, "string", 0},
		{"Progressing", `.status.conditions[?(@.type=="Progressing")].status`, "string", 0},
		{"Degraded", `.status.conditions[?(@.type=="Degraded")].status`, "string", 0},
		{"Reason", `.status.conditions[?(@.reason!="AsExpected")].reason`, "string", 0},
		{"Message", `.status.conditions[?(@.reason!="AsExpected")].message`, "string", 1},
		{"Second Address", ".status.addresses[1].ip", "string", 1},
		{"Pool", ".spec.pool", "string", 1},
		{"Age", ".metadata.creationTimestamp", "date", 0},
	}
	var got []column
	for _, c := range v.AdditionalPrinterColumns {
		got = append(got, column{c.Name, c.JSONPath, c.Type, c.Priority})
	}
	if !slices.Equal(got, want) {
		t.Errorf("printer columns\n got %+v\nwant %+v", got, want)
	}
	for _, problem := range checkRules(v.Schema.OpenAPIV3Schema, "") {
		t.Error(problem)
	}
}
