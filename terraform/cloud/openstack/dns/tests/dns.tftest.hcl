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
    condition     = openstack_dns_recordset_v2.api.name == "api.trawl.example." && length(openstack_dns_recordset_v2.api.records) == 3
    error_message = "api names every region's gate"
  }
  assert {
    condition     = output.region_names == { eu = "eu.trawl.example", sin = "sin.trawl.example", us = "us.trawl.example" }
    error_message = "region_names"
  }
}

run "zone_needs_a_dot" {
  command = plan
  variables {
    zone = "trawl.example"
  }
  expect_failures = [var.zone]
}
