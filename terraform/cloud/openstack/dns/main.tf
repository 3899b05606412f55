# The deployment's names in an OpenStack DNS (Designate) zone:
#   <region>.<zone>   each region's gate, by name: a client pins a region
#                     with it (the spec's one address per region);
#   api.<zone>        every region's gate. Designate answers the same set
#                     everywhere (round robin): it has no latency or geo
#                     routing, so this name does not send a client to its
#                     nearest region. docs/terraform.md says why and what to
#                     put in front for that.

terraform {
  required_version = ">= 1.6"
  required_providers {
    openstack = {
      source  = "terraform-provider-openstack/openstack"
      version = "~> 3.4"
    }
  }
}

variable "zone" {
  description = "The zone, with its final dot (trawl.example.)."
  type        = string
  validation {
    condition     = endswith(var.zone, ".")
    error_message = "zone must end with a dot."
  }
}

variable "email" {
  description = "The zone's contact."
  type        = string
}

variable "gates" {
  description = "Each region's gate IPv4, by region."
  type        = map(string)
}

variable "ttl" {
  type    = number
  default = 60
}

resource "openstack_dns_zone_v2" "zone" {
  name  = var.zone
  email = var.email
  ttl   = 300
}

resource "openstack_dns_recordset_v2" "region" {
  for_each = var.gates
  zone_id  = openstack_dns_zone_v2.zone.id
  name     = "${each.key}.${var.zone}"
  type     = "A"
  ttl      = var.ttl
  records  = [each.value]
}

resource "openstack_dns_recordset_v2" "api" {
  zone_id = openstack_dns_zone_v2.zone.id
  name    = "api.${var.zone}"
  type    = "A"
  ttl     = var.ttl
  records = sort(values(var.gates))
}

output "region_names" {
  value = { for r, rs in openstack_dns_recordset_v2.region : r => trimsuffix(rs.name, ".") }
}

output "api_name" {
  value = trimsuffix(openstack_dns_recordset_v2.api.name, ".")
}
