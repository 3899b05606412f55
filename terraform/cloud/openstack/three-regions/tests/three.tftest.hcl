# The three-region root module with the cloud mocked: the addresses come
# first, each region is given the other two as peers, the DNS names all
# three.

mock_provider "openstack" {
  alias = "eu"
}
mock_provider "openstack" {
  alias = "sin"
}
mock_provider "openstack" {
  alias = "us"
}
mock_provider "openstack" {
  alias = "dns"
}

override_module {
  target  = module.addr_eu
  outputs = { ip = "203.0.113.10", port_id = "port-eu" }
}
override_module {
  target  = module.addr_sin
  outputs = { ip = "198.51.100.20", port_id = "port-sin" }
}
override_module {
  target  = module.addr_us
  outputs = { ip = "192.0.2.30", port_id = "port-us" }
}

variables {
  key_pair      = "ops"
  ledger_secret = "ledger-secret"
  region_keys   = { eu = "k-eu-0123456789abcdef", sin = "k-sin-0123456789abcdef", us = "k-us-0123456789abcdef" }
  operator_key  = "trawl_op_0123456789abcdef"
}

run "three_regions" {
  command = apply

  assert {
    condition     = output.gates == { eu = "203.0.113.10", sin = "198.51.100.20", us = "192.0.2.30" }
    error_message = "one gate address per region"
  }
  assert {
    condition     = output.names == { eu = "eu.trawl.example", sin = "sin.trawl.example", us = "us.trawl.example" }
    error_message = "each region has its name"
  }
  assert {
    condition     = length(module.eu.cells) == 3 && length(module.sin.cells) == 3 && length(module.us.cells) == 3 && module.sin.gate_url == "http://198.51.100.20:8081"
    error_message = "each region's gate and three cells"
  }
  assert {
    condition     = module.eu.peers_flag == "sin=198.51.100.20:7001/198.51.100.20:8081,us=192.0.2.30:7001/192.0.2.30:8081" && module.us.peers_flag == "eu=203.0.113.10:7001/203.0.113.10:8081,sin=198.51.100.20:7001/198.51.100.20:8081"
    error_message = "every region is given the other two as peers"
  }
}

run "more_cells_in_one_region" {
  command = plan
  variables {
    cells = { us = 5 }
  }
  assert {
    condition     = length(module.us.cells) == 5 && length(module.eu.cells) == 3
    error_message = "a region given more cells has them; the others keep three"
  }
}

run "three_regions_nearest" {
  command = apply
  variables {
    client_cidrs = { eu = ["10.1.0.0/16"], sin = ["10.2.0.0/16"], us = ["0.0.0.0/0"] }
  }

  assert {
    condition     = output.api_name == "api.trawl.example" && length(module.dns.api_name) > 0 && output.names["sin"] == "sin.trawl.example"
    error_message = "api and the region names"
  }
  assert {
    condition     = strcontains(module.geodns[0].zone, "\"sin = {{'198.51.100.20'}, {'203.0.113.10', '192.0.2.30'}}, \"") && strcontains(module.geodns[0].zone, "\"{{'10.2.0.0/16'}, {'sin'}}, \"")
    error_message = "the zone has every gate and region"
  }
  assert {
    condition     = module.geodns[0].name_servers == { eu = "eu.api.trawl.example.", sin = "sin.api.trawl.example.", us = "us.api.trawl.example." }
    error_message = "the name servers are the gates"
  }
}

run "three_regions_round_robin_without_cidrs" {
  command = apply
  assert {
    condition     = length(module.geodns) == 0 && output.api_name == "api.trawl.example"
    error_message = "no client_cidrs and no GeoIP database: no geodns"
  }
}
