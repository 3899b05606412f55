package jsnode

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/trawlhq/trawl/internal/regionauth"
)

// RoutePassword is the password of the cluster's one route user:
// hex(HMAC-SHA256(primary key, "trawl/nats-route/<region>")). Only a
// holder of the region's primary key can form a route.
func RoutePassword(keys *regionauth.Keys, region string) string {
	m := hmac.New(sha256.New, keys.Primary())
	m.Write([]byte("trawl/nats-route/" + region))
	return hex.EncodeToString(m.Sum(nil))
}

// RouteServerName is the name every route certificate carries and every
// route handshake verifies. Cells reach each other by addresses that
// are often wrong from the inside of a container; the CA, which only a
// holder of the region key can use, is what identifies a cell.
func RouteServerName(region string) string { return "route." + region + ".trawl.internal" }

// caEpoch fixes the CA's validity, so that every cell derives the same
// certificate byte for byte (Ed25519 signatures are deterministic).
var caEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// RegionCA derives the region's route CA from the primary key: an
// Ed25519 key from HKDF(primary, "trawl/nats-ca/<region>") and a
// self-signed certificate with a fixed serial and validity.
func RegionCA(keys *regionauth.Keys, region string) (*x509.Certificate, ed25519.PrivateKey, error) {
	seed, err := hkdf.Key(sha256.New, keys.Primary(), nil, "trawl/nats-ca/"+region, ed25519.SeedSize)
	if err != nil {
		return nil, nil, fmt.Errorf("jsnode: derive CA key: %w", err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "trawl " + region + " route CA"},
		NotBefore:             caEpoch,
		NotAfter:              caEpoch.AddDate(100, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("jsnode: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("jsnode: CA certificate: %w", err)
	}
	return cert, key, nil
}

// IssueLeaf issues a route certificate signed by the CA, for the region's
// route name and host (an IP or a DNS name; "" or an unspecified address
// adds nothing). Its key is new at every call.
func IssueLeaf(ca *x509.Certificate, caKey ed25519.PrivateKey, region, host string) (tls.Certificate, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: RouteServerName(region)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{RouteServerName(region)},
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsUnspecified() {
			tmpl.IPAddresses = []net.IP{ip}
		}
	} else if host != "" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("jsnode: leaf certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}, nil
}

// RouteTLS is the routes' TLS configuration derived from the region key:
// TLS 1.3, this node's leaf, and peers verified against the region CA in
// both directions.
func RouteTLS(keys *regionauth.Keys, region, host string) (*tls.Config, error) {
	ca, caKey, err := RegionCA(keys, region)
	if err != nil {
		return nil, err
	}
	leaf, err := IssueLeaf(ca, caKey, region, host)
	if err != nil {
		return nil, err
	}
	return RouteTLSWith(ca, leaf, region), nil
}

// RouteTLSWith is RouteTLS with a given CA and leaf (tests, and an
// operator's own certificates).
func RouteTLSWith(ca *x509.Certificate, leaf tls.Certificate, region string) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{leaf},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ServerName:   RouteServerName(region),
	}
}
