package main

// The lab's keys and certificates, made fresh at every start: a CA, the API servers' serving
// certificate (for 127.0.0.1 and localhost), the admin user's client certificate (group
// system:masters, so RBAC lets it do everything), and the service-account signing key. Nothing
// here is meant to protect anything beyond one test run on loopback.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

type pki struct {
	dir string
	// PEM bytes, for the kubeconfig.
	caPEM, adminCertPEM, adminKeyPEM []byte
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func makePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	now := time.Now().Add(-time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gitfleet-testbed-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	p.caPEM = pemBlock("CERTIFICATE", caDER)
	if err := writeFiles(p, "ca.crt", p.caPEM); err != nil {
		return nil, err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return nil, err
	}
	if err := writeFiles(p, "ca.key", pemBlock("EC PRIVATE KEY", caKeyDER)); err != nil {
		return nil, err
	}

	issue := func(name string, serial int64, tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore = now
		tmpl.NotAfter = now.Add(10 * 365 * 24 * time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		certPEM, keyPEM = pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER)
		if err := writeFiles(p, name+".crt", certPEM); err != nil {
			return nil, nil, err
		}
		return certPEM, keyPEM, writeFiles(p, name+".key", keyPEM)
	}
	if _, _, err := issue("serving", 2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}); err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	p.adminCertPEM, p.adminKeyPEM, err = issue("admin", 3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "gitfleet-testbed-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}

	// Service-account tokens are signed with RSA, the algorithm every client of them accepts.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public().(crypto.PublicKey))
	if err != nil {
		return nil, err
	}
	if err := writeFiles(p, "sa.key", pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey))); err != nil {
		return nil, err
	}
	if err := writeFiles(p, "sa.pub", pemBlock("PUBLIC KEY", pub)); err != nil {
		return nil, err
	}
	return p, nil
}

func pemBlock(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func writeFiles(p *pki, name string, data []byte) error {
	return os.WriteFile(p.path(name), data, 0o600)
}
