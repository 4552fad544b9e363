package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testPlatforms are the platforms TestImage builds: the host's only. make image builds
// DefaultPlatforms (TestDefaultPlatforms), through the same per-platform code with another GOARCH;
// cross-compiling the five binaries for the second platform doubled the test's time (225 s of a
// make test) for no code of its own, and under load it ran the suite into its timeout. The
// host's platform is also the one whose binaries the test can run.
var testPlatforms = []string{"linux/" + runtime.GOARCH}

// TestImage builds the image as make image does, for the host's platform (testPlatforms), reads it
// back from the OCI layout and the docker-archive tarball, checks the config, the files and the
// binaries' machine types, and runs the binaries it extracts from the layer.
func TestImage(t *testing.T) {
	out := t.TempDir()
	var said bytes.Buffer
	res, err := Build(Options{OutDir: out, Repository: DefaultRepository, Version: "test", Platforms: testPlatforms, Progress: &said})
	if err != nil {
		t.Fatal(err)
	}
	checkProgress(t, said.String(), out, testPlatforms)
	lp, err := layout.FromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil || len(topManifest.Manifests) != 1 || topManifest.Manifests[0].Digest != res.IndexDigest ||
		topManifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != DefaultRepository+":test" {
		t.Fatalf("layout's index.json: %+v, %v; want the one image index, named %s:test", topManifest, err, DefaultRepository)
	}
	idx, err := top.ImageIndex(res.IndexDigest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var platforms []string
	for _, d := range im.Manifests {
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		files := checkImage(t, img, d.Platform.Architecture)
		for name, data := range files {
			f, err := elf.NewFile(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("%s /%s: not an ELF binary: %v", d.Platform.Architecture, name, err)
			}
			if f.Machine != machines[d.Platform.Architecture] {
				t.Errorf("%s /%s is built for %v", d.Platform.Architecture, name, f.Machine)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s /%s is dynamically linked: the image has no libc", d.Platform.Architecture, name)
				}
			}
		}
		if d.Platform.OS == runtime.GOOS && d.Platform.Architecture == runtime.GOARCH {
			runBinaries(t, files)
		}
	}
	sort.Strings(platforms)
	if !slices.Equal(platforms, testPlatforms) {
		t.Fatalf("index platforms %v, want %v", platforms, testPlatforms)
	}

	t.Run("docker-archive tarball", func(t *testing.T) {
		if !slices.Contains(testPlatforms, "linux/amd64") {
			if _, err := os.Stat(filepath.Join(out, "netpool-linux-amd64.docker.tar")); !os.IsNotExist(err) {
				t.Errorf("a build without linux/amd64 wrote its docker-archive tarball (%v)", err)
			}
			return
		}
		tag, err := name.NewTag(DefaultRepository + ":test")
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(filepath.Join(out, "netpool-linux-amd64.docker.tar"), &tag)
		if err != nil {
			t.Fatalf("docker load would fail: %v", err)
		}
		checkImage(t, img, "amd64")
	})
	t.Run("OCI archive", func(t *testing.T) {
		names := tarNames(t, filepath.Join(out, "netpool-oci.tar"))
		for _, want := range []string{"oci-layout", "index.json"} {
			if !slices.Contains(names, want) {
				t.Errorf("the OCI archive lacks %s: %v", want, names)
			}
		}
	})
	t.Run("the Dockerfile builds the same image", func(t *testing.T) {
		checkDockerfile(t)
	})
}

// checkImage checks an image's config and its one layer, and returns the layer's files.
func checkImage(t *testing.T, img v1.Image, arch string) map[string][]byte {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != arch || cf.Config.User != User || !slices.Equal(cf.Config.Entrypoint, Entrypoint) ||
		cf.Config.Labels["org.opencontainers.image.version"] != "test" {
		t.Errorf("%s config: os %s arch %s user %q entrypoint %v labels %v", arch, cf.OS, cf.Architecture, cf.Config.User, cf.Config.Entrypoint, cf.Config.Labels)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: %d layers, %v; want one", arch, len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Mode != 0o755 || h.Typeflag != tar.TypeReg {
			t.Errorf("%s /%s: mode %o type %c, want an executable regular file", arch, h.Name, h.Mode, h.Typeflag)
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	if want := slices.Sorted(slices.Values(Binaries)); !slices.Equal(names, want) {
		t.Errorf("%s layer holds %v, want %v", arch, names, want)
	}
	return files
}

// TestDefaultPlatforms: make image, which passes no -platforms, builds both platforms, though
// TestImage builds one.
func TestDefaultPlatforms(t *testing.T) {
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(DefaultPlatforms, want) {
		t.Errorf("DefaultPlatforms = %v, want %v", DefaultPlatforms, want)
	}
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	rule := regexp.MustCompile(`(?m)^\t.* run \./hack/image( .*)?$`).Find(makefile)
	if rule == nil || strings.Contains(string(rule), "-platforms") {
		t.Errorf("the Makefile's image rule %q does not build the default platforms", rule)
	}
}

// runBinaries runs each extracted binary of the host's platform the way its user would first
// meet it.
func runBinaries(t *testing.T, files map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, plugin := range []string{"netpool", "netpool-egress-router"} {
		cmd := exec.Command(filepath.Join(dir, plugin))
		cmd.Env = []string{"CNI_COMMAND=VERSION"}
		cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
		out, err := cmd.Output()
		var v struct {
			Supported []string `json:"supportedVersions"`
		}
		if err != nil || json.Unmarshal(out, &v) != nil || !slices.Contains(v.Supported, "1.1.0") {
			t.Errorf("/%s VERSION: %q, %v", plugin, out, err)
		}
	}
	for _, c := range [][]string{{"netpoolctl", "--help"}, {"netpool-agent", "--help"}, {"netpool-controller", "--help"}} {
		out, err := exec.Command(filepath.Join(dir, c[0]), c[1:]...).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "Usage") {
			t.Errorf("/%s %v: %v\n%s", c[0], c[1:], err, out)
		}
		if !strings.Contains(strings.ToLower(string(out)), "usage") {
			t.Errorf("/%s --help printed no usage: %s", c[0], out)
		}
	}
}

func tarNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

// checkDockerfile compares the Dockerfile's final stage with the image: the files it copies, its
// user and its entrypoint.
func checkDockerfile(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	final := string(data)
	if i := strings.LastIndex(final, "\nFROM "); i >= 0 {
		final = final[i:]
	}
	var copied []string
	for _, m := range regexp.MustCompile(`(?m)^COPY --from=build /out/(\S+) /(\S+)$`).FindAllStringSubmatch(final, -1) {
		if m[1] != m[2] {
			t.Errorf("Dockerfile copies %s to /%s", m[1], m[2])
		}
		copied = append(copied, m[2])
	}
	sort.Strings(copied)
	if want := slices.Sorted(slices.Values(Binaries)); !slices.Equal(copied, want) {
		t.Errorf("Dockerfile copies %v, the image holds %v", copied, want)
	}
	if !strings.Contains(final, "\nFROM scratch\n") || !strings.Contains(final, "\nUSER "+User+"\n") {
		t.Errorf("Dockerfile's final stage is not FROM scratch with USER %s", User)
	}
	ep, _ := json.Marshal(Entrypoint)
	if !strings.Contains(final, "\nENTRYPOINT "+string(ep)+"\n") {
		t.Errorf("Dockerfile's ENTRYPOINT is not %s", ep)
	}
	for _, b := range Binaries {
		if !strings.Contains(string(data), " "+b+" ") && !strings.Contains(string(data), " "+b+";") {
			t.Errorf("Dockerfile's build stage does not build %s", b)
		}
	}
}

// checkProgress: Build said, as it went, each platform's binaries and each file it wrote, each
// line with the time since it began.
func checkProgress(t *testing.T, said, out string, platforms []string) {
	t.Helper()
	var want []string
	for _, p := range platforms {
		want = append(want, p+": building "+strings.Join(Binaries, ", "))
		for _, b := range Binaries {
			want = append(want, p+": built "+b)
		}
		want = append(want, p+": image assembled")
	}
	files := []string{"oci", "netpool-oci.tar"}
	if slices.Contains(platforms, "linux/amd64") {
		files = append(files, "netpool-linux-amd64.docker.tar")
	}
	for _, f := range files {
		want = append(want, "wrote "+filepath.Join(out, f))
	}
	elapsed := regexp.MustCompile(`^image: (.*) \(([0-9.hms]+)\)$`)
	lines := strings.Split(strings.TrimSuffix(said, "\n"), "\n")
	var got []string
	for _, l := range lines {
		m := elapsed.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("progress line %q has no elapsed time", l)
			continue
		}
		got = append(got, m[1])
	}
	if !slices.Equal(got, want) {
		t.Errorf("progress said\n%s\nwant, in order:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
