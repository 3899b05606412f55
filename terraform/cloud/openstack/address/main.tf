# A region's gate address, made before any machine: a port on the cloud's
# external network with a fixed public IPv4. Every region's gate is given
# every other's address at boot (--peers), so the addresses come first and
# the regions do not depend on each other.

terraform {
  required_version = ">= 1.6"
  required_providers {
    openstack = {
      source  = "terraform-provider-openstack/openstack"
      version = "~> 3.4"
    }
  }
}

variable "region" {
  description = "The trawl region (eu, sin, us: [a-z0-9]{1,16})."
  type        = string
}

variable "external_network" {
  description = "The cloud's external network whose ports carry public IPv4 addresses (OVHcloud: Ext-Net)."
  type        = string
  default     = "Ext-Net"
}

data "openstack_networking_network_v2" "external" {
  name = var.external_network
}

resource "openstack_networking_port_v2" "gate" {
  name           = "trawl-${var.region}-gate"
  network_id     = data.openstack_networking_network_v2.external.id
  admin_state_up = true
}

output "port_id" {
  value = openstack_networking_port_v2.gate.id
}

output "ip" {
  description = "The gate's public IPv4 address."
  value       = [for ip in openstack_networking_port_v2.gate.all_fixed_ips : ip if can(regex("^[0-9.]+$", ip))][0]
}
