package envtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err error, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", substr)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("got error %q, want one containing %q", err, substr)
	}
}

func TestFindModule(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "go.mod"), "// the checkout\nmodule github.com/netpool/netpool\n\ngo 1.26\n", 0o644)
	writeFile(t, filepath.Join(dir, "hack", "tools", "go.mod"), "module github.com/netpool/netpool/hack/tools\n", 0o644)
	writeFile(t, filepath.Join(dir, "quoted", "go.mod"), "module \"example.com/quoted\"\n", 0o644)
	nested := filepath.Join(dir, "hack", "tools", "sub")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		from   string
		module string
		want   string
		err    string
	}{
		{name: "at the root", from: dir, module: modulePath, want: dir},
		{name: "skips another module's go.mod", from: nested, module: modulePath, want: dir},
		{name: "finds the nested module", from: nested, module: modulePath + "/hack/tools", want: filepath.Join(dir, "hack", "tools")},
		{name: "quoted module path", from: filepath.Join(dir, "quoted"), module: "example.com/quoted", want: filepath.Join(dir, "quoted")},
		{name: "absent", from: nested, module: "example.com/absent", err: "no go.mod of module example.com/absent at or above " + nested},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := findModule(tt.from, tt.module)
			if tt.err != "" {
				wantErr(t, err, tt.err)
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("findModule(%s, %s) = %q, %v; want %q", tt.from, tt.module, got, err, tt.want)
			}
		})
	}
}

func TestFindModuleUnreadableGoMod(t *testing.T) {
	dir := t.TempDir()
	// A directory named go.mod cannot be read as a file.
	if err := os.MkdirAll(filepath.Join(dir, "go.mod"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := findModule(dir, modulePath)
	wantErr(t, err, "failed to read "+filepath.Join(dir, "go.mod"))
}

func TestModuleRootIsThisCheckout(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "hack", "envtest-binaries.sh")); err != nil {
		t.Fatalf("module root %s has no hack/envtest-binaries.sh: %v", root, err)
	}
}

func TestCheckAssets(t *testing.T) {
	complete := t.TempDir()
	writeFile(t, filepath.Join(complete, "kube-apiserver"), "", 0o755)
	writeFile(t, filepath.Join(complete, "etcd"), "", 0o755)
	noEtcd := t.TempDir()
	writeFile(t, filepath.Join(noEtcd, "kube-apiserver"), "", 0o755)
	notExec := t.TempDir()
	writeFile(t, filepath.Join(notExec, "kube-apiserver"), "", 0o755)
	writeFile(t, filepath.Join(notExec, "etcd"), "", 0o644)

	tests := []struct {
		name string
		dir  string
		err  string
	}{
		{name: "complete", dir: complete},
		{name: "empty path", dir: "", err: "no binary directory"},
		{name: "missing etcd", dir: noEtcd, err: "failed to find etcd"},
		{name: "etcd not executable", dir: notExec, err: "etcd in " + notExec + " is not executable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkAssets(tt.dir)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("checkAssets(%s) = %v, want nil", tt.dir, err)
				}
				return
			}
			wantErr(t, err, tt.err)
		})
	}
}

func TestRunBinariesScript(t *testing.T) {
	assets := t.TempDir()
	writeFile(t, filepath.Join(assets, "kube-apiserver"), "", 0o755)
	writeFile(t, filepath.Join(assets, "etcd"), "", 0o755)

	tests := []struct {
		name   string
		script string
		err    string
	}{
		{name: "prints the directory", script: "echo building >&2\necho " + assets + "\n"},
		{name: "fails", script: "echo cannot build >&2\nexit 3\n", err: "exit status 3\ncannot build"},
		{name: "prints an empty directory", script: "echo " + t.TempDir() + "\n", err: "failed to find kube-apiserver"},
		{name: "prints nothing", script: "true\n", err: "no binary directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeFile(t, filepath.Join(root, "hack", "envtest-binaries.sh"), tt.script, 0o755)
			got, err := runBinariesScript(root, DefaultModule)
			if tt.err != "" {
				wantErr(t, err, tt.err)
				return
			}
			if err != nil || got != assets {
				t.Fatalf("runBinariesScript = %q, %v; want %q", got, err, assets)
			}
		})
	}
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	badCRDs := t.TempDir()
	writeFile(t, filepath.Join(badCRDs, "bad.yaml"), `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: bads.example.com
spec:
  group: example.com
  names: {kind: Bad, plural: bads}
  scope: Cluster
  versions: []
`, 0o644)

	tests := []struct {
		name   string
		crdDir string
		err    string
	}{
		{name: "missing CRD directory", crdDir: filepath.Join(t.TempDir(), "absent"), err: "unable to read CRD files"},
		{name: "invalid CRD", crdDir: badCRDs, err: "unable to install CRDs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			e, err := start(dir, root, DefaultModule, tt.crdDir)
			if err == nil {
				_ = e.Stop() // the test fails below anyway; don't leave the control plane running
				t.Fatalf("start with %s succeeded, want an error", tt.crdDir)
			}
			wantErr(t, err, tt.err)
		})
	}
}

func TestStartControlPlaneFailures(t *testing.T) {
	t.Parallel()
	e := Start(t)
	plane := &e.env.ControlPlane
	etcdPath, apiPath := plane.Etcd.Path, plane.APIServer.Path

	if err := e.StopControlPlane(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	wantErr(t, waitServed(ctx, e.Client), "netpool kinds not served after the restart")

	plane.Etcd.Path = filepath.Join(t.TempDir(), "no-etcd")
	wantErr(t, e.StartControlPlane(), "failed to restart etcd")

	plane.Etcd.Path = etcdPath
	plane.APIServer.Path = filepath.Join(t.TempDir(), "no-kube-apiserver")
	wantErr(t, e.StartControlPlane(), "failed to restart kube-apiserver")

	// The failed attempts left nothing behind: the real binaries start on the same ports and data.
	plane.APIServer.Path = apiPath
	if err := e.StartControlPlane(); err != nil {
		t.Fatalf("restarting after the failures: %v", err)
	}
}

func TestUserKubeconfigFailures(t *testing.T) {
	t.Parallel()
	e := Shared(t)
	_, err := e.userKubeconfig(t.TempDir(), "", nil)
	wantErr(t, err, "the user name is empty")

	_, err = e.userKubeconfig(filepath.Join(t.TempDir(), "absent"), "bob", nil)
	wantErr(t, err, `failed to write the kubeconfig of "bob"`)

	_, err = e.NewClient(filepath.Join(t.TempDir(), "absent.kubeconfig"))
	wantErr(t, err, "failed to load kubeconfig")

	wantErr(t, e.finishStart(filepath.Join(t.TempDir(), "absent")), "failed to write the admin kubeconfig")

	path, err := e.userKubeconfig(t.TempDir(), "system:serviceaccount:ns:sa/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if base := filepath.Base(path); base != "system_serviceaccount_ns_sa_x.kubeconfig" {
		t.Fatalf("kubeconfig file name %q", base)
	}
}
