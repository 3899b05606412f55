# The geodns module renders text only (no provider): the zone's names, the
# LUA record's rules and address sets, each gate's PowerDNS configuration,
# and the refusals of bad input. TestGeoDNS (terraform/geodns_test.go)
# serves what it renders with a real PowerDNS.

variables {
  zone  = "trawl.example."
  email = "ops@trawl.example"
  gates = { eu = "203.0.113.10", sin = "198.51.100.20", us = "192.0.2.30" }
  client_cidrs = {
    eu  = ["10.0.0.0/8", "2001:db8:1::/48"]
    sin = ["10.2.0.0/16"]
    us  = ["0.0.0.0/0"]
  }
}

run "zone" {
  command = apply

  assert {
    condition     = output.subzone == "api.trawl.example." && output.name_servers == { eu = "eu.api.trawl.example.", sin = "sin.api.trawl.example.", us = "us.api.trawl.example." }
    error_message = "the subzone and its name servers"
  }
  assert {
    condition     = strcontains(output.zone, "$ORIGIN api.trawl.example.\n") && strcontains(output.zone, "@ IN SOA eu.api.trawl.example. ops.trawl.example. (") && strcontains(output.zone, "@ IN NS sin.api.trawl.example.\n")
    error_message = "SOA and NS of the subzone"
  }
  assert {
    condition     = strcontains(output.zone, "\neu IN A 203.0.113.10\n") && strcontains(output.zone, "\nsin IN A 198.51.100.20\n") && strcontains(output.zone, "\nus IN A 192.0.2.30\n")
    error_message = "each region's gate by name (pinning; the name servers' addresses)"
  }
  assert {
    condition     = strcontains(output.zone, "@ IN LUA A ( \";local ok = ") && strcontains(output.zone, "local url = 'http://api.trawl.example:8081/health' ")
    error_message = "api.<zone> is a LUA record checking each gate's /health on 8081"
  }
  assert {
    # Most specific first: sin's /16 before eu's /8, before us's /0.
    condition     = strcontains(output.zone, "\"{{'10.2.0.0/16'}, {'sin'}}, \"\n  \"{{'10.0.0.0/8'}, {'eu'}}, \"\n  \"{{'0.0.0.0/0'}, {'us'}}, \"")
    error_message = "the view() rules, most specific first"
  }
  assert {
    condition     = strcontains(output.zone, "\"sin = {{'198.51.100.20'}, {'203.0.113.10', '192.0.2.30'}}, \"") && strcontains(output.zone, "selector = 'random'")
    error_message = "a region's gate first, then the others"
  }
  assert {
    condition     = !strcontains(replace(output.zone, "\\\"", ""), "\"status\"") && strcontains(output.zone, "string.char(34) .. 'status' .. string.char(34)")
    error_message = "the health text is written without a double quote in the record"
  }
  assert {
    condition     = strcontains(output.pdns_conf["sin"], "local-address=198.51.100.20\nlocal-port=53\n") && strcontains(output.pdns_conf["sin"], "launch=bind\n") && strcontains(output.pdns_conf["sin"], "\nenable-lua-records=yes\n") && strcontains(output.pdns_conf["sin"], "\nedns-subnet-processing=yes\n")
    error_message = "each gate's PowerDNS listens on its address, port 53, LUA records and ECS on"
  }
  assert {
    condition     = strcontains(output.pdns_conf["eu"], "disable-axfr=yes\nallow-axfr-ips=\n") && !strcontains(output.pdns_conf["eu"], "geoip")
    error_message = "no zone transfers; no GeoIP without a database"
  }
  assert {
    condition     = keys(output.files) == ["/etc/powerdns/trawl/api.trawl.example.zone", "/etc/powerdns/trawl/named.conf"] && strcontains(output.files["/etc/powerdns/trawl/named.conf"], "zone \"api.trawl.example\" {\n  type master;\n  file \"/etc/powerdns/trawl/api.trawl.example.zone\";")
    error_message = "named.conf loads the zone"
  }
  assert {
    condition     = output.packages == ["pdns-server", "pdns-backend-bind"]
    error_message = "packages"
  }
}

run "geoip" {
  command = apply
  variables {
    client_cidrs   = { eu = ["10.1.0.0/16"] }
    geoip_database = "/var/lib/GeoIP/GeoLite2-City.mmdb"
  }
  assert {
    condition     = strcontains(output.pdns_conf["us"], "launch=bind,geoip\n") && strcontains(output.pdns_conf["us"], "\ngeoip-database-files=/var/lib/GeoIP/GeoLite2-City.mmdb\ngeoip-zones-file=/etc/powerdns/trawl/geoip-zones.yaml\n") && contains(keys(output.files), "/etc/powerdns/trawl/geoip-zones.yaml")
    error_message = "with a database, the geoip backend is launched"
  }
  assert {
    condition     = strcontains(output.zone, "selector = 'pickclosest', backupSelector = 'pickclosest'") && contains(output.packages, "pdns-backend-geoip")
    error_message = "with a database, the closest live gate"
  }
}

run "health_any_200" {
  command = apply
  variables {
    health_match = ""
    health_port  = 9000
  }
  assert {
    condition     = strcontains(output.zone, "\";local ok = '' \"") && strcontains(output.zone, "'http://api.trawl.example:9000/health'")
    error_message = "an empty health_match takes any 200"
  }
}

run "bad_cidr_refused" {
  command = plan
  variables {
    client_cidrs = { eu = ["10.1.0.0/16"], sin = ["10.2.0.300/16"], us = ["0.0.0.0/0"] }
  }
  expect_failures = [var.client_cidrs]
}

run "an_address_is_not_a_cidr" {
  command = plan
  variables {
    client_cidrs = { eu = ["10.1.0.1"], sin = ["10.2.0.0/16"], us = ["0.0.0.0/0"] }
  }
  expect_failures = [var.client_cidrs]
}

run "region_without_cidrs_refused" {
  command = plan
  variables {
    client_cidrs = { eu = ["10.1.0.0/16"], sin = ["10.2.0.0/16"] }
  }
  expect_failures = [var.client_cidrs]
}

run "cidrs_of_no_gate_refused" {
  command = plan
  variables {
    client_cidrs = { eu = ["10.1.0.0/16"], sin = ["10.2.0.0/16"], us = ["0.0.0.0/0"], ap = ["10.4.0.0/16"] }
  }
  expect_failures = [var.client_cidrs]
}

run "ipv6_gate_refused" {
  command = plan
  variables {
    gates = { eu = "2001:db8::10", sin = "198.51.100.20", us = "192.0.2.30" }
  }
  expect_failures = [var.gates]
}

run "quote_in_health_match_refused" {
  command = plan
  variables {
    health_match = "it's ok"
  }
  expect_failures = [var.health_match]
}

run "zone_needs_a_dot" {
  command = plan
  variables {
    zone = "trawl.example"
  }
  expect_failures = [var.zone]
}

run "geoip_database_needs_its_extension" {
  command = plan
  variables {
    geoip_database = "/var/lib/GeoIP/GeoLite2-City"
  }
  expect_failures = [var.geoip_database]
}
