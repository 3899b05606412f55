mock_provider "openstack" {}

variables {
  zone  = "trawl.example."
  email = "ops@trawl.example"
  gates = { eu = "203.0.113.10", sin = "198.51.100.20", us = "192.0.2.30" }
}

run "names" {
  command = apply

  assert {
    condition     = openstack_dns_recordset_v2.region["sin"].name == "sin.trawl.example." && openstack_dns_recordset_v2.region["sin"].records == toset(["198.51.100.20"])
    error_message = "a region is pinned by its name"
  }
  assert {
    condition     = openstack_dns_recordset_v2.api[0].name == "api.trawl.example." && length(openstack_dns_recordset_v2.api[0].records) == 3 && length(openstack_dns_recordset_v2.api_ns) == 0
    error_message = "without nearest, api names every region's gate"
  }
  assert {
    condition     = output.region_names == { eu = "eu.trawl.example", sin = "sin.trawl.example", us = "us.trawl.example" }
    error_message = "region_names"
  }
}

run "nearest_delegates_api" {
  command = apply
  variables {
    nearest = { eu = "eu.api.trawl.example.", sin = "sin.api.trawl.example.", us = "us.api.trawl.example." }
  }
  assert {
    condition     = length(openstack_dns_recordset_v2.api) == 0 && openstack_dns_recordset_v2.api_ns[0].name == "api.trawl.example." && openstack_dns_recordset_v2.api_ns[0].type == "NS"
    error_message = "api.<zone> is delegated (NS), not a round robin"
  }
  assert {
    condition     = openstack_dns_recordset_v2.api_ns[0].records == toset(["eu.api.trawl.example.", "sin.api.trawl.example.", "us.api.trawl.example."])
    error_message = "to the three gates' PowerDNS"
  }
  assert {
    condition     = { for r, rs in openstack_dns_recordset_v2.glue : rs.name => [rs.type, one(rs.records)] } == { "eu.api.trawl.example." = ["A", "203.0.113.10"], "sin.api.trawl.example." = ["A", "198.51.100.20"], "us.api.trawl.example." = ["A", "192.0.2.30"] }
    error_message = "the glue: each name server's gate address"
  }
  assert {
    condition     = openstack_dns_recordset_v2.region["eu"].records == toset(["203.0.113.10"]) && output.api_name == "api.trawl.example"
    error_message = "pinning by name stays"
  }
}

run "nearest_outside_the_zone_refused" {
  command = plan
  variables {
    nearest = { eu = "ns1.elsewhere.example.", sin = "sin.api.trawl.example.", us = "us.api.trawl.example." }
  }
  expect_failures = [openstack_dns_recordset_v2.api_ns]
}

run "zone_needs_a_dot" {
  command = plan
  variables {
    zone = "trawl.example"
  }
  expect_failures = [var.zone]
}
