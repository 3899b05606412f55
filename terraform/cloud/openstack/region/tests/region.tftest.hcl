# The region module against a mocked OpenStack provider: what it would
# create and with which flags (no cloud is reached).

mock_provider "openstack" {}

variables {
  region        = "eu"
  gate_port_id  = "port-eu"
  gate_ip       = "203.0.113.10"
  peers         = { sin = "198.51.100.20", us = "192.0.2.30" }
  public_url    = "https://eu.trawl.example"
  key_pair      = "ops"
  ledger_secret = "ledger-secret"
  region_keys   = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  operator_key  = "trawl_op_0123456789abcdef"
}

run "a_region" {
  command = apply

  assert {
    condition     = toset(keys(openstack_compute_instance_v2.cell)) == toset(["c1", "c2", "c3"])
    error_message = "three cells by default, c1 to c3 (a region of three keeps its streams' quorum with one dead)"
  }
  assert {
    condition     = strcontains(openstack_compute_instance_v2.gate.user_data, "gate config --region eu --listen 203.0.113.10:8081") && strcontains(openstack_compute_instance_v2.gate.user_data, "--ledger-raft 203.0.113.10:7001")
    error_message = "the gate listens and runs its voter on its address"
  }
  assert {
    condition     = strcontains(openstack_compute_instance_v2.gate.user_data, "--peers 'sin=198.51.100.20:7001/198.51.100.20:8081,us=192.0.2.30:7001/192.0.2.30:8081'") && strcontains(openstack_compute_instance_v2.gate.user_data, "--bootstrap=true")
    error_message = "the gate knows every other region's voter and gate"
  }
  assert {
    condition     = strcontains(openstack_compute_instance_v2.gate.user_data, "TRAWL_OPERATOR_KEY=trawl_op_0123456789abcdef") && !strcontains(openstack_compute_instance_v2.cell["c1"].user_data, "TRAWL_LEDGER_SECRET")
    error_message = "the gate has the ledger secret and operator key; cells have neither"
  }
  assert {
    condition     = strcontains(openstack_compute_instance_v2.cell["c1"].user_data, "cell --region eu --name c1") && strcontains(openstack_compute_instance_v2.cell["c1"].user_data, "--members-join 203.0.113.10:7946")
    error_message = "a cell joins its gate's membership under its name"
  }
  assert {
    condition     = alltrue([for n, c in openstack_compute_instance_v2.cell : strcontains(c.user_data, "cell --region eu --name ${n} ") && strcontains(c.user_data, "--members-bind $ip:7946 --members-join 203.0.113.10:7946 --route-listen $ip:7422\"]")])
    error_message = "every cell is clustered: its NATS routes on its own address (the one it advertises), port 7422, beside its membership"
  }
  assert {
    condition     = alltrue([for n, c in openstack_compute_instance_v2.cell : strcontains(yamldecode(c.user_data).runcmd[1][2], "--name ${n} ") && strcontains(yamldecode(c.user_data).runcmd[1][2], "--route-listen $ip:7422")])
    error_message = "a cell's cloud-init is valid YAML and its docker run command is clustered"
  }
  assert {
    condition     = alltrue([for c in openstack_compute_instance_v2.cell : !strcontains(c.user_data, "0.0.0.0:7422") && strcontains(c.user_data, "--data /data/")])
    error_message = "a cell never routes on 0.0.0.0 (its peers would dial themselves), and its data (JetStream's too) is on its volume"
  }
  assert {
    condition     = openstack_networking_secgroup_rule_v2.cell_routes.protocol == "tcp" && openstack_networking_secgroup_rule_v2.cell_routes.direction == "ingress" && openstack_networking_secgroup_rule_v2.cell_routes.port_range_min == 7422 && openstack_networking_secgroup_rule_v2.cell_routes.port_range_max == 7422
    error_message = "the cells' NATS routes: 7422/tcp in"
  }
  assert {
    # remote_group_id conflicts with remote_ip_prefix in the provider's
    # schema: a rule from the cells' group has no CIDR, 0.0.0.0/0 or other.
    condition     = openstack_networking_secgroup_rule_v2.cell_routes.remote_group_id == openstack_networking_secgroup_v2.cell.id && openstack_networking_secgroup_rule_v2.cell_routes.security_group_id == openstack_networking_secgroup_v2.cell.id
    error_message = "7422 is open to the region's cells only"
  }
  assert {
    condition     = alltrue([for r in concat(values(openstack_networking_secgroup_rule_v2.gate_api), values(openstack_networking_secgroup_rule_v2.gate_dns), values(openstack_networking_secgroup_rule_v2.gate_raft), values(openstack_networking_secgroup_rule_v2.gate_members), values(openstack_networking_secgroup_rule_v2.cell_members), [openstack_networking_secgroup_rule_v2.cell_api]) : r.port_range_max < 7422 || r.port_range_min > 7422])
    error_message = "no other rule opens 7422 (not to the gate, not to a CIDR)"
  }
  assert {
    condition     = toset([for r in openstack_networking_secgroup_rule_v2.gate_raft : r.remote_ip_prefix]) == toset(["198.51.100.20/32", "192.0.2.30/32"]) && alltrue([for r in openstack_networking_secgroup_rule_v2.gate_raft : r.port_range_min == 7001])
    error_message = "Raft is open to the other gates only"
  }
  assert {
    condition     = openstack_networking_secgroup_rule_v2.cell_api.port_range_min == 8080 && openstack_networking_secgroup_rule_v2.cell_api.remote_group_id == openstack_networking_secgroup_v2.gate.id
    error_message = "a cell's API is open to its gate's group only"
  }
  assert {
    condition     = length(openstack_compute_volume_attach_v2.cell) == 3 && openstack_blockstorage_volume_v3.cell["c3"].size == 100
    error_message = "each cell has its data volume"
  }
  assert {
    condition     = output.gate_url == "http://203.0.113.10:8081"
    error_message = "gate_url"
  }
  assert {
    condition     = length(openstack_networking_secgroup_rule_v2.gate_dns) == 0 && yamldecode(openstack_compute_instance_v2.gate.user_data).packages == ["docker.io"] && !strcontains(openstack_compute_instance_v2.gate.user_data, "systemctl")
    error_message = "without geodns, no DNS on the gate"
  }
}

run "a_region_with_geodns" {
  command = apply
  variables {
    geodns = {
      pdns_conf = "launch=bind\nlocal-address=203.0.113.10\nlocal-port=53\n"
      files     = { "/etc/powerdns/trawl/named.conf" = "zone \"api.trawl.example\" {\n  type master;\n};\n", "/etc/powerdns/trawl/api.trawl.example.zone" = "@ IN LUA A ( \";local ok = ''\" )\n" }
      packages  = ["pdns-server", "pdns-backend-bind"]
    }
  }
  assert {
    condition     = toset([for r in openstack_networking_secgroup_rule_v2.gate_dns : "${r.protocol} ${r.port_range_min}-${r.port_range_max} ${r.remote_ip_prefix} ${r.direction}"]) == toset(["tcp 53-53 0.0.0.0/0 ingress", "udp 53-53 0.0.0.0/0 ingress"])
    error_message = "DNS (UDP and TCP 53) is open to the world on the gate"
  }
  assert {
    condition     = alltrue([for r in openstack_networking_secgroup_rule_v2.gate_dns : r.security_group_id == openstack_networking_secgroup_v2.gate.id])
    error_message = "the DNS rules are the gate's"
  }
  assert {
    condition     = yamldecode(openstack_compute_instance_v2.gate.user_data).packages == ["docker.io", "pdns-server", "pdns-backend-bind"]
    error_message = "the gate installs PowerDNS"
  }
  assert {
    condition     = { for f in yamldecode(openstack_compute_instance_v2.gate.user_data).write_files : f.path => f.content if startswith(f.path, "/etc/powerdns/") } == merge(var.geodns.files, { "/etc/powerdns/pdns-trawl.conf" = var.geodns.pdns_conf })
    error_message = "the gate writes the configuration and zone as given (valid YAML, exact text)"
  }
  assert {
    condition     = strcontains(openstack_compute_instance_v2.gate.user_data, "systemctl disable --now pdns.service; systemctl enable --now pdns@trawl.service")
    error_message = "the gate runs pdns@trawl (pdns-trawl.conf), not Debian's default instance"
  }
  assert {
    condition     = strcontains(openstack_compute_instance_v2.gate.user_data, "gate config --region eu --listen 203.0.113.10:8081")
    error_message = "the gate itself is unchanged"
  }
}

run "two_cells" {
  command = plan
  variables {
    cells = 2
  }
  assert {
    condition     = toset(keys(openstack_compute_instance_v2.cell)) == toset(["c1", "c2"]) && alltrue([for c in openstack_compute_instance_v2.cell : strcontains(c.user_data, "--route-listen $ip:7422")])
    error_message = "fewer cells are still clustered"
  }
}

run "an_added_region" {
  command = plan
  variables {
    region    = "ap"
    cells     = 1
    bootstrap = false
    peers     = { eu = "203.0.113.10" }
  }
  assert {
    condition     = length(openstack_compute_instance_v2.cell) == 1 && strcontains(openstack_compute_instance_v2.gate.user_data, "--bootstrap=false")
    error_message = "a region added later joins (no bootstrap)"
  }
}

run "no_cells_refused" {
  command = plan
  variables {
    cells = 0
  }
  expect_failures = [var.cells]
}

run "bad_region_refused" {
  command = plan
  variables {
    region = "EU-1"
  }
  expect_failures = [var.region]
}
