package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// DefaultRepository is the one image every manifest in deploy/ names.
const DefaultRepository = "ghcr.io/netpool/netpool"

// DefaultPlatforms are the platforms make image builds.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// Binaries are the commands in the image, each at /<name>. The Dockerfile copies the same list
// (a test compares them).
var Binaries = []string{"netpool", "netpool-agent", "netpool-controller", "netpool-egress-router", "netpoolctl"}

// User is the image's default user: the controller and netpoolctl need no privilege. The agent
// and its installer write root-owned host directories, and their DaemonSet says runAsUser: 0.
const User = "65532:65532"

// Entrypoint is the image's default command; every manifest names its own.
var Entrypoint = []string{"/netpoolctl"}

// epoch is every file's modification time, so two builds of one commit give the same layer.
var epoch = time.Unix(0, 0).UTC()

// Options of Build.
type Options struct {
	OutDir     string
	Repository string
	Version    string
	LDFlags    string
	Platforms  []string
	// Progress, when set, gets a line per binary built and file written, with the time since
	// Build began: a cold build takes minutes and must not look hung.
	Progress io.Writer
}

// progress writes one line of what Build did, with the time since start.
type progress struct {
	w     io.Writer
	start time.Time
}

func (p progress) say(format string, args ...any) {
	if p.w != nil {
		fmt.Fprintf(p.w, "image: %s (%s)\n", fmt.Sprintf(format, args...), time.Since(p.start).Round(100*time.Millisecond))
	}
}

// Result says what Build wrote.
type Result struct {
	IndexDigest v1.Hash
	Written     []string
}

// Build compiles the binaries for each platform and writes the image.
func Build(o Options) (*Result, error) {
	if len(o.Platforms) == 0 {
		return nil, fmt.Errorf("no platform to build")
	}
	ref, err := name.NewTag(o.Repository + ":" + o.Version)
	if err != nil {
		return nil, fmt.Errorf("image reference %s:%s: %w", o.Repository, o.Version, err)
	}
	work, err := os.MkdirTemp("", "netpool-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	pr := progress{w: o.Progress, start: time.Now()}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var amd64 v1.Image
	for _, p := range o.Platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil || plat.OS == "" || plat.Architecture == "" {
			return nil, fmt.Errorf("platform %q: want os/arch", p)
		}
		dir := filepath.Join(work, plat.OS+"-"+plat.Architecture)
		if err := compile(dir, plat, o.LDFlags, pr); err != nil {
			return nil, err
		}
		img, err := image(dir, plat, o.Version)
		if err != nil {
			return nil, err
		}
		if plat.OS == "linux" && plat.Architecture == "amd64" {
			amd64 = img
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: plat}})
		pr.say("%s: image assembled", p)
	}
	res := &Result{}
	if res.IndexDigest, err = idx.Digest(); err != nil {
		return nil, err
	}
	ociDir := filepath.Join(o.OutDir, "oci")
	if err := os.RemoveAll(ociDir); err != nil {
		return nil, err
	}
	lp, err := layout.Write(ociDir, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("writing the OCI layout: %w", err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": ref.Name(), // podman and ctr tag the import with it
	})); err != nil {
		return nil, fmt.Errorf("writing the OCI layout: %w", err)
	}
	res.Written = append(res.Written, ociDir)
	pr.say("wrote %s", ociDir)
	archive := filepath.Join(o.OutDir, "netpool-oci.tar")
	if err := tarDir(ociDir, archive); err != nil {
		return nil, err
	}
	res.Written = append(res.Written, archive)
	pr.say("wrote %s", archive)
	if amd64 != nil {
		path := filepath.Join(o.OutDir, "netpool-linux-amd64.docker.tar")
		if err := tarball.WriteToFile(path, ref, amd64); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		res.Written = append(res.Written, path)
		pr.say("wrote %s", path)
	}
	return res, nil
}

// compile builds every binary, static, for plat into dir.
func compile(dir string, plat *v1.Platform, ldflags string, pr progress) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	pr.say("%s/%s: building %s", plat.OS, plat.Architecture, strings.Join(Binaries, ", "))
	for _, b := range Binaries {
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", strings.TrimSpace("-s -w "+ldflags),
			"-o", filepath.Join(dir, b), "./cmd/"+b)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+plat.OS, "GOARCH="+plat.Architecture, "GOFLAGS=-mod=readonly")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/%s for %s/%s: %w\n%s", b, plat.OS, plat.Architecture, err, out)
		}
		pr.say("%s/%s: built %s", plat.OS, plat.Architecture, b)
	}
	return nil
}

// image puts the binaries of dir into one layer on an empty base, with the config for plat.
func image(dir string, plat *v1.Platform, version string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, b := range Binaries {
		data, err := os.ReadFile(filepath.Join(dir, b))
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{Name: b, Mode: 0o755, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Created = v1.Time{Time: epoch}
	cf.Config.User = User
	cf.Config.Entrypoint = Entrypoint
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "netpool",
		"org.opencontainers.image.version": version,
		"org.opencontainers.image.source":  "https://github.com/netpool/netpool",
	}
	return mutate.ConfigFile(img, cf)
}

// tarDir writes the files under dir into a tar at path, in name order.
func tarDir(dir, path string) error {
	var files []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// moduleRoot finds the checkout's go.mod from the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
