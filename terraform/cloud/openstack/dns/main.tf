# The deployment's names in an OpenStack DNS (Designate) zone:
#   <region>.<zone>   each region's gate, by name: a client pins a region
#                     with it (the spec's one address per region);
#   api.<zone>        with `nearest` (../geodns's name_servers): delegated
#                     to the gates' PowerDNS, which answers each client its
#                     nearest live gate (NS <region>.api.<zone>., with their
#                     glue A records here); without: every region's gate,
#                     the same set to everyone (round robin: Designate has
#                     no latency or geo routing). docs/terraform.md, "The
#                     nearest region".

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

variable "nearest" {
  description = "The name servers of api.<zone> by region (../geodns: name_servers), each a gate's PowerDNS; null: api.<zone> is a round robin of A records."
  type        = map(string)
  default     = null
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
  count   = var.nearest == null ? 1 : 0
  zone_id = openstack_dns_zone_v2.zone.id
  name    = "api.${var.zone}"
  type    = "A"
  ttl     = var.ttl
  records = sort(values(var.gates))
}

moved {
  from = openstack_dns_recordset_v2.api
  to   = openstack_dns_recordset_v2.api[0]
}

# The delegation of api.<zone> to the gates' PowerDNS, and the glue: each
# name server's address (its name is under the delegated name).
resource "openstack_dns_recordset_v2" "api_ns" {
  count   = var.nearest == null ? 0 : 1
  zone_id = openstack_dns_zone_v2.zone.id
  name    = "api.${var.zone}"
  type    = "NS"
  ttl     = 3600
  records = sort(values(var.nearest))
  lifecycle {
    precondition {
      condition     = alltrue([for r, ns in var.nearest : contains(keys(var.gates), r) && endswith(ns, ".api.${var.zone}")])
      error_message = "nearest must name, for regions of gates, servers under api.<zone> (../geodns: name_servers)."
    }
  }
}

resource "openstack_dns_recordset_v2" "glue" {
  for_each = var.nearest == null ? {} : var.nearest
  zone_id  = openstack_dns_zone_v2.zone.id
  name     = each.value
  type     = "A"
  ttl      = 3600
  records  = [var.gates[each.key]]
}

output "region_names" {
  value = { for r, rs in openstack_dns_recordset_v2.region : r => trimsuffix(rs.name, ".") }
}

output "api_name" {
  value = "api.${trimsuffix(var.zone, ".")}"
}
