# One trawl region on an OpenStack cloud: its gate (Caddy with trawl's
# modules and the region's ledger voter) on the address made by ../address,
# and its cells, each with its own data volume. The machines run the
# trawl image (deploy/Dockerfile) from var.image. docs/terraform.md says
# what is tested here and what needs a cloud account.

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
  description = "The trawl region (eu, sin, us)."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9]{1,16}$", var.region))
    error_message = "region must be [a-z0-9]{1,16}."
  }
}

variable "gate_port_id" {
  description = "The gate's port (../address: port_id)."
  type        = string
}

variable "gate_ip" {
  description = "The gate's public IPv4 (../address: ip)."
  type        = string
}

variable "peers" {
  description = "Every other region's gate address, by region: their voters and gates are reached there (Raft on 7001, the gate on 8081)."
  type        = map(string)
  default     = {}
}

variable "bootstrap" {
  description = "Form the ledger group from the peers when the gate's data is new: true on every region of a new deployment (all start with the same peers); false for a region added later (then `trawl ledger join` it, docs/operations.md)."
  type        = bool
  default     = true
}

variable "public_url" {
  description = "The region's public base URL (its TLS front: https://eu.trawl.example)."
  type        = string
}

variable "cells" {
  description = "Number of cells (c1, c2, …). They form the region's JetStream cluster and share its work; with three (the default) its streams keep their quorum with one cell dead, with two a dead cell stops them."
  type        = number
  default     = 3
  validation {
    condition     = var.cells >= 1 && var.cells <= 64
    error_message = "cells must be 1 to 64."
  }
}

variable "external_network" {
  type    = string
  default = "Ext-Net"
}

variable "image_name" {
  description = "The machines' OS image (Debian 12)."
  type        = string
  default     = "Debian 12"
}

variable "gate_flavor" {
  type    = string
  default = "b3-8"
}

variable "cell_flavor" {
  type    = string
  default = "b3-16"
}

variable "cell_volume_gb" {
  description = "Each cell's data volume (its Pebble store: cache, archive, jobs, monitors)."
  type        = number
  default     = 100
}

variable "key_pair" {
  description = "The SSH key pair of the machines."
  type        = string
}

variable "image" {
  description = "The trawl container image (deploy/Dockerfile)."
  type        = string
  default     = "ghcr.io/trawlhq/trawl:latest"
}

variable "ledger_secret" {
  description = "TRAWL_LEDGER_SECRET: the same in every region."
  type        = string
  sensitive   = true
}

variable "region_keys" {
  description = "TRAWL_REGION_KEYS: this region's keys (openssl rand -hex 32)."
  type        = string
  sensitive   = true
}

variable "operator_key" {
  description = "TRAWL_OPERATOR_KEY: the bootstrap operator key (the operator API; the trawl provider)."
  type        = string
  sensitive   = true
}

variable "front_cidrs" {
  description = "Who may reach the gate's port 8081: the TLS front proxies (and the other regions' gates, added from peers)."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "geodns" {
  description = "The gate's PowerDNS, authoritative for api.<zone> (../geodns: pdns_conf[region], files, packages); null: none."
  type = object({
    pdns_conf = string
    files     = map(string)
    packages  = list(string)
  })
  default = null
}

locals {
  peers_flag = join(",", [for r, ip in var.peers : "${r}=${ip}:7001/${ip}:8081"])
  cell_names = [for i in range(var.cells) : "c${i + 1}"]
  # A clustered cell's NATS route port (--route-listen).
  route_port = 7422
}

data "openstack_networking_network_v2" "external" {
  name = var.external_network
}

# The gate: 8081 (the public API, the ledger's internal routes and other
# regions' forwards; the trawl secret guards /internal/), 7001 (Raft) from
# the other gates only, 7946 (membership) from the region's cells only, and
# with geodns 53 (its PowerDNS) from anywhere.
resource "openstack_networking_secgroup_v2" "gate" {
  name        = "trawl-${var.region}-gate"
  description = "trawl ${var.region} gate"
}

resource "openstack_networking_secgroup_v2" "cell" {
  name        = "trawl-${var.region}-cell"
  description = "trawl ${var.region} cells"
}

resource "openstack_networking_secgroup_rule_v2" "gate_api" {
  for_each          = toset(concat(var.front_cidrs, [for ip in values(var.peers) : "${ip}/32"]))
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = 8081
  port_range_max    = 8081
  remote_ip_prefix  = each.value
  security_group_id = openstack_networking_secgroup_v2.gate.id
}

# The gate's PowerDNS (geodns) is a public authoritative server: DNS from
# anywhere.
resource "openstack_networking_secgroup_rule_v2" "gate_dns" {
  for_each          = var.geodns == null ? toset([]) : toset(["tcp", "udp"])
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = each.value
  port_range_min    = 53
  port_range_max    = 53
  remote_ip_prefix  = "0.0.0.0/0"
  security_group_id = openstack_networking_secgroup_v2.gate.id
}

resource "openstack_networking_secgroup_rule_v2" "gate_raft" {
  for_each          = var.peers
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = 7001
  port_range_max    = 7001
  remote_ip_prefix  = "${each.value}/32"
  security_group_id = openstack_networking_secgroup_v2.gate.id
}

resource "openstack_networking_secgroup_rule_v2" "gate_members" {
  for_each          = toset(["tcp", "udp"])
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = each.value
  port_range_min    = 7946
  port_range_max    = 7946
  remote_group_id   = openstack_networking_secgroup_v2.cell.id
  security_group_id = openstack_networking_secgroup_v2.gate.id
}

# Cells: 8080 (requests the gate signs), 7946 from the gate and the other
# cells, and 7422 (NATS routes of the region's JetStream cluster) from the
# other cells only: the gate runs no NATS, and nothing outside the region
# has a reason to reach a route (they also need the route password and a
# certificate, both derived from the region's keys).
resource "openstack_networking_secgroup_rule_v2" "cell_api" {
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = 8080
  port_range_max    = 8080
  remote_group_id   = openstack_networking_secgroup_v2.gate.id
  security_group_id = openstack_networking_secgroup_v2.cell.id
}

resource "openstack_networking_secgroup_rule_v2" "cell_members" {
  for_each          = { for p in setproduct(["tcp", "udp"], ["gate", "cell"]) : "${p[0]}-${p[1]}" => p }
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = each.value[0]
  port_range_min    = 7946
  port_range_max    = 7946
  remote_group_id   = each.value[1] == "gate" ? openstack_networking_secgroup_v2.gate.id : openstack_networking_secgroup_v2.cell.id
  security_group_id = openstack_networking_secgroup_v2.cell.id
}

resource "openstack_networking_secgroup_rule_v2" "cell_routes" {
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = local.route_port
  port_range_max    = local.route_port
  remote_group_id   = openstack_networking_secgroup_v2.cell.id
  security_group_id = openstack_networking_secgroup_v2.cell.id
}

resource "openstack_networking_port_secgroup_associate_v2" "gate" {
  port_id            = var.gate_port_id
  security_group_ids = [openstack_networking_secgroup_v2.gate.id]
}

resource "openstack_blockstorage_volume_v3" "gate" {
  name = "trawl-${var.region}-gate-data"
  size = 50
}

resource "openstack_compute_instance_v2" "gate" {
  name        = "trawl-${var.region}-gate"
  image_name  = var.image_name
  flavor_name = var.gate_flavor
  key_pair    = var.key_pair
  network {
    port = var.gate_port_id
  }
  user_data = templatefile("${path.module}/gate.cloud-init.yaml", {
    image         = var.image
    region        = var.region
    ip            = var.gate_ip
    public_url    = var.public_url
    peers         = local.peers_flag
    bootstrap     = var.bootstrap
    ledger_secret = var.ledger_secret
    region_keys   = var.region_keys
    operator_key  = var.operator_key
    dns_packages  = var.geodns == null ? [] : var.geodns.packages
    dns_files     = var.geodns == null ? {} : merge(var.geodns.files, { "/etc/powerdns/pdns-trawl.conf" = var.geodns.pdns_conf })
  })
  depends_on = [openstack_networking_port_secgroup_associate_v2.gate]
}

resource "openstack_compute_volume_attach_v2" "gate" {
  instance_id = openstack_compute_instance_v2.gate.id
  volume_id   = openstack_blockstorage_volume_v3.gate.id
}

resource "openstack_blockstorage_volume_v3" "cell" {
  for_each = toset(local.cell_names)
  name     = "trawl-${var.region}-${each.key}-data"
  size     = var.cell_volume_gb
}

resource "openstack_compute_instance_v2" "cell" {
  for_each        = toset(local.cell_names)
  name            = "trawl-${var.region}-${each.key}"
  image_name      = var.image_name
  flavor_name     = var.cell_flavor
  key_pair        = var.key_pair
  security_groups = [openstack_networking_secgroup_v2.cell.name]
  network {
    uuid = data.openstack_networking_network_v2.external.id
  }
  user_data = templatefile("${path.module}/cell.cloud-init.yaml", {
    image       = var.image
    region      = var.region
    name        = each.key
    gate_ip     = var.gate_ip
    route_port  = local.route_port
    region_keys = var.region_keys
  })
}

resource "openstack_compute_volume_attach_v2" "cell" {
  for_each    = toset(local.cell_names)
  instance_id = openstack_compute_instance_v2.cell[each.key].id
  volume_id   = openstack_blockstorage_volume_v3.cell[each.key].id
}

output "gate_ip" {
  value = var.gate_ip
}

output "gate_url" {
  description = "The gate's plain-HTTP address (put the TLS front here)."
  value       = "http://${var.gate_ip}:8081"
}

output "cells" {
  value = { for n, c in openstack_compute_instance_v2.cell : n => c.access_ip_v4 }
}

output "peers_flag" {
  description = "The gate's --peers."
  value       = local.peers_flag
}
