package cluster

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage is the image of test/cluster/images/server, imported on every node: it listens on TCP
// 8080 and answers with the pod's addresses.
const TestImage = "localhost/netpool-test/server:1"

// NetpoolRepository is the repository of the image every manifest in deploy/ names.
const NetpoolRepository = "ghcr.io/netpool/netpool"

// buildImages writes the image archives the nodes import: pause, the test server, and netpool's
// image from make image's code path (hack/image, linux/amd64 only), tagged tag. It returns the
// archives.
func buildImages(root, dir, tag string) ([]string, error) {
	var archives []string
	for _, im := range []struct{ pkg, ref string }{
		{"./test/cluster/images/pause", PauseImage},
		{"./test/cluster/images/server", TestImage},
	} {
		bin, err := goBuild(root, dir, im.pkg)
		if err != nil {
			return nil, err
		}
		archive := bin + ".tar"
		if err := singleBinaryImage(bin, im.ref, archive); err != nil {
			return nil, err
		}
		archives = append(archives, archive)
	}
	out := filepath.Join(dir, "netpool")
	ldflags := "-X github.com/netpool/netpool/internal/version.Version=" + tag
	cmd := exec.Command("go", "run", "./hack/image", "-out", out, "-version", tag, "-platforms", "linux/amd64", "-ldflags", ldflags)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go run ./hack/image: %w\n%s", err, b)
	}
	return append(archives, filepath.Join(out, "netpool-linux-amd64.docker.tar")), nil
}

// goBuild builds the command pkg of the checkout at root as a static linux/amd64 binary in dir and
// returns its path.
func goBuild(root, dir, pkg string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// singleBinaryImage writes a docker archive of an image with one layer that holds bin at /<name>,
// its entrypoint.
func singleBinaryImage(bin, ref, archive string) error {
	base := "/" + filepath.Base(bin)
	return layerImage([]imageFile{{name: base, src: bin, mode: 0o755}}, []string{base}, ref, archive)
}

// imageFile is one entry of an image's only layer at name: a file of data or of the file src
// (mode), or, with link, a symbolic link to link, or, with none of them, a directory (mode).
type imageFile struct {
	name, src, link string
	data            []byte
	mode            int64
}

// layerImage writes a docker archive of a linux/amd64 image with one layer of files on an empty
// base, with entrypoint.
func layerImage(files []imageFile, entrypoint []string, ref, archive string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: strings.TrimPrefix(f.name, "/"), Mode: f.mode, ModTime: time.Unix(0, 0)}
		var data []byte
		switch {
		case f.link != "":
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.link, 0o777
		case f.src == "" && f.data == nil:
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		default:
			data = f.data
			if f.src != "" {
				var err error
				if data, err = os.ReadFile(f.src); err != nil {
					return err
				}
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = entrypoint
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(archive, tag, img)
}

// importImages imports the archives into the node's containerd, in kubelet's namespace.
func (n *Node) importImages(ctr string, archives []string) error {
	for _, a := range archives {
		if _, err := run(ctr, "--address", n.ContainerdSocket(), "-n", "k8s.io", "images", "import", "--platform", "linux/amd64", a); err != nil {
			return fmt.Errorf("importing %s on %s: %w", filepath.Base(a), n.Name, err)
		}
	}
	return nil
}
