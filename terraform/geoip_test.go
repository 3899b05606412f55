package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// writeCityDB writes a GeoIP2-City-shaped database (only location.latitude
// and location.longitude, what PowerDNS reads for pickclosest) placing
// each network at a point.
func writeCityDB(t *testing.T, path string, points map[string][2]float64) {
	w, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoIP2-City", RecordSize: 28, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	for cidr, p := range points {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			t.Fatal(err)
		}
		rec := mmdbtype.Map{"location": mmdbtype.Map{
			"latitude": mmdbtype.Float64(p[0]), "longitude": mmdbtype.Float64(p[1]), "accuracy_radius": mmdbtype.Uint16(20),
		}}
		if err := w.Insert(n, rec); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// The geodns module with a GeoIP database (geoip_database): PowerDNS's
// geoip backend launched with a City database made here (the gates in
// Paris, Singapore and New York; clients in London, Jakarta, Chicago,
// Tokyo), only eu with client CIDRs. A client in a region's CIDRs gets that
// region; any other client the closest live gate (pickclosest); with the
// closest gate down, the closest of the others. The same PowerDNS as
// TestGeoDNS, on loopback.
func TestGeoDNSGeoIP(t *testing.T) {
	if libs, _ := filepath.Glob("/usr/lib/*/pdns/libgeoipbackend.so"); len(libs) == 0 {
		t.Fatal("no PowerDNS geoip backend: run `bash scripts/deps.sh test` (it installs Debian's pdns-backend-geoip)")
	}
	gates, healthPort := startGates(t)
	db := filepath.Join(t.TempDir(), "GeoLite2-City-test.mmdb")
	writeCityDB(t, db, map[string][2]float64{
		"127.0.0.11/32":    {48.86, 2.35},   // eu's gate: Paris
		"127.0.0.12/32":    {1.35, 103.82},  // sin's gate: Singapore
		"127.0.0.13/32":    {40.71, -74.01}, // us's gate: New York
		"10.50.0.0/16":     {51.51, -0.13},  // London
		"10.60.0.0/16":     {-6.21, 106.85}, // Jakarta
		"10.70.0.0/16":     {41.88, -87.63}, // Chicago
		"2001:db8:60::/48": {35.68, 139.69}, // Tokyo
	})
	g := startGeoDNS(t, strings.ReplaceAll(geodnsRoot, `  client_cidrs = {
    eu  = ["10.1.0.0/16", "2001:db8:1::/48"]
    sin = ["10.2.0.0/16", "192.0.2.128/25"]
    us  = ["10.3.0.0/16", "0.0.0.0/0", "::/0"]
  }`, `  client_cidrs   = { eu = ["10.1.0.0/16"] }
  geoip_database = "`+db+`"`), healthPort)
	conf := g.out.PdnsConf.Value["eu"]
	if !strings.Contains(conf, "launch=bind,geoip\n") || !strings.Contains(conf, "geoip-database-files="+db+"\n") {
		t.Fatalf("eu's pdns-trawl.conf with a GeoIP database:\n%s", conf)
	}

	const api = "api.trawl.example."
	g.steadily("London is closest to Paris", api, "10.50.1.0/24", is(gates["eu"].ip))
	g.steadily("Jakarta is closest to Singapore", api, "10.60.1.0/24", is(gates["sin"].ip))
	g.steadily("Chicago is closest to New York", api, "10.70.1.0/24", is(gates["us"].ip))
	g.steadily("Tokyo (IPv6) is closest to Singapore", api, "2001:db8:60:1::/64", is(gates["sin"].ip))
	g.steadily("a client in eu's CIDRs gets eu", api, "10.1.7.0/24", is(gates["eu"].ip))

	// Singapore is down: Jakarta's and Tokyo's closest live gate is Paris
	// (PowerDNS ranks by the squared differences of latitude and longitude
	// in degrees: Jakarta 13,953 to Paris, 34,291 to New York; Tokyo
	// 19,036 and 21,428).
	gates["sin"].state.Store("down")
	g.steadily("sin is down: Jakarta gets the closest live gate", api, "10.60.1.0/24", is(gates["eu"].ip))
	g.steadily("sin is down: Tokyo gets the closest live gate", api, "2001:db8:60:1::/64", is(gates["eu"].ip))
	g.steadily("sin is down: Chicago keeps New York", api, "10.70.1.0/24", is(gates["us"].ip))
	gates["sin"].state.Store("ok")
	g.steadily("sin is back for Jakarta", api, "10.60.1.0/24", is(gates["sin"].ip))

	// eu's gate is down: a client in eu's CIDRs (no location in the
	// database) goes to another live gate; London to the closest of the
	// others, New York (5,575 against Singapore's 13,322).
	gates["eu"].state.Store("down")
	g.steadily("eu is down: its CIDRs' clients go elsewhere", api, "10.1.7.0/24", elsewhere(gates["eu"].ip))
	g.steadily("eu is down: London gets New York", api, "10.50.1.0/24", is(gates["us"].ip))
	gates["eu"].state.Store("ok")
	g.steadily("eu is back for London", api, "10.50.1.0/24", is(gates["eu"].ip))
}
