package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pki is the cluster's trust: one CA that signs the apiserver's serving certificate, the key that
// signs service-account tokens, and a bearer token per identity (the apiserver's token file).
type pki struct {
	dir    string
	caFile string
	// certFile and keyFile are the apiserver's serving pair.
	certFile, keyFile string
	// saKey and saPub sign and verify service-account tokens.
	saKey, saPub string
	tokenFile    string
	tokens       map[string]string // user -> token
}

// identity is one user of the token file.
type identity struct {
	user   string
	groups []string
}

func newPKI(dir string, serving []net.IP, ids []identity) (*pki, error) {
	p := &pki{dir: dir, tokens: map[string]string{}}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Hour)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "netpool-test-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.caFile = filepath.Join(dir, "ca.crt")
	if err := writePEM(p.caFile, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now,
		NotAfter:     now.Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  serving,
		DNSNames:     []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	p.certFile, p.keyFile = filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key")
	if err := writePEM(p.certFile, "CERTIFICATE", srvDER); err != nil {
		return nil, err
	}
	if err := writeKey(p.keyFile, srvKey); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	p.saKey, p.saPub = filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if err := writeKey(p.saKey, saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.saPub, "PUBLIC KEY", pubDER); err != nil {
		return nil, err
	}
	var lines []string
	for i, id := range ids {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		tok := hex.EncodeToString(b)
		p.tokens[id.user] = tok
		line := fmt.Sprintf("%s,%s,uid-%d", tok, id.user, i)
		if len(id.groups) > 0 {
			line += `,"` + strings.Join(id.groups, ",") + `"`
		}
		lines = append(lines, line)
	}
	p.tokenFile = filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(p.tokenFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// kubeconfig writes a kubeconfig for user at path, against server.
func (p *pki) kubeconfig(path, server, user string) error {
	tok, ok := p.tokens[user]
	if !ok {
		return fmt.Errorf("no token for %s", user)
	}
	ca, err := os.ReadFile(p.caFile)
	if err != nil {
		return err
	}
	// The CA inline: a pod or a private mount namespace reads the file without the PKI directory.
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: netpool-test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: netpool-test
  context: {cluster: netpool-test, user: %s}
current-context: netpool-test
`, server, b64(ca), user, tok, user)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(data), 0o600)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func writeKey(path string, k *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}
