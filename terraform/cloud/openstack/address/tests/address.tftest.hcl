# The gate's address is the port's IPv4, whatever IPv6 the external
# network also gives it.

mock_provider "openstack" {
  mock_resource "openstack_networking_port_v2" {
    defaults = {
      all_fixed_ips = ["2001:db8::5", "203.0.113.10"]
    }
  }
}

variables {
  region = "eu"
}

run "address" {
  command = apply
  assert {
    condition     = output.ip == "203.0.113.10" && openstack_networking_port_v2.gate.name == "trawl-eu-gate"
    error_message = "the IPv4 of the gate's port"
  }
}
