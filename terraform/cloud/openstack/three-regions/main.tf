# Three regions (eu, sin, us) on one OpenStack cloud with regions near each
# (the defaults are OVHcloud's: GRA11, SGP1, US-EAST-VA-1) and their names.
# Credentials come from the usual OS_* variables or clouds.yaml.

terraform {
  required_version = ">= 1.6"
  required_providers {
    openstack = {
      source  = "terraform-provider-openstack/openstack"
      version = "~> 3.4"
    }
  }
}

variable "cloud_regions" {
  description = "The cloud's region for each trawl region."
  type        = map(string)
  default     = { eu = "GRA11", sin = "SGP1", us = "US-EAST-VA-1" }
}

variable "dns_region" {
  description = "The cloud region whose Designate holds the zone."
  type        = string
  default     = "GRA11"
}

variable "zone" {
  type    = string
  default = "trawl.example."
}

variable "email" {
  type    = string
  default = "ops@trawl.example"
}

variable "client_cidrs" {
  description = "The client networks each region serves (../geodns): with them (or geoip_database), api.<zone> is delegated to the gates' PowerDNS, which sends each client to its nearest live gate; without, api.<zone> is a round robin."
  type        = map(list(string))
  default     = {}
}

variable "geoip_database" {
  description = "A GeoLite2/GeoIP2 City .mmdb already on every gate (../geodns): a client outside client_cidrs goes to the closest live gate."
  type        = string
  default     = ""
}

variable "cells" {
  description = "Cells of a region, by region (default 3 each: a region's cells form its JetStream cluster, whose streams keep their quorum with one of three dead)."
  type        = map(number)
  default     = {}
}

variable "key_pair" {
  type = string
}

variable "image" {
  type    = string
  default = "ghcr.io/trawlhq/trawl:latest"
}

variable "ledger_secret" {
  type      = string
  sensitive = true
}

variable "region_keys" {
  description = "TRAWL_REGION_KEYS of each region."
  type        = map(string)
  sensitive   = true
}

variable "operator_key" {
  type      = string
  sensitive = true
}

provider "openstack" {
  alias  = "eu"
  region = var.cloud_regions["eu"]
}

provider "openstack" {
  alias  = "sin"
  region = var.cloud_regions["sin"]
}

provider "openstack" {
  alias  = "us"
  region = var.cloud_regions["us"]
}

provider "openstack" {
  alias  = "dns"
  region = var.dns_region
}

module "addr_eu" {
  source    = "../address"
  providers = { openstack = openstack.eu }
  region    = "eu"
}

module "addr_sin" {
  source    = "../address"
  providers = { openstack = openstack.sin }
  region    = "sin"
}

module "addr_us" {
  source    = "../address"
  providers = { openstack = openstack.us }
  region    = "us"
}

locals {
  gates   = { eu = module.addr_eu.ip, sin = module.addr_sin.ip, us = module.addr_us.ip }
  ports   = { eu = module.addr_eu.port_id, sin = module.addr_sin.port_id, us = module.addr_us.port_id }
  nearest = length(var.client_cidrs) > 0 || var.geoip_database != ""
  geodns  = { for r in keys(local.gates) : r => local.nearest ? { pdns_conf = module.geodns[0].pdns_conf[r], files = module.geodns[0].files, packages = module.geodns[0].packages } : null }
}

module "geodns" {
  count          = local.nearest ? 1 : 0
  source         = "../geodns"
  zone           = var.zone
  email          = var.email
  gates          = local.gates
  client_cidrs   = var.client_cidrs
  geoip_database = var.geoip_database
}

module "eu" {
  source        = "../region"
  providers     = { openstack = openstack.eu }
  region        = "eu"
  gate_port_id  = local.ports["eu"]
  gate_ip       = local.gates["eu"]
  peers         = { for r, ip in local.gates : r => ip if r != "eu" }
  public_url    = "https://eu.${trimsuffix(var.zone, ".")}"
  key_pair      = var.key_pair
  image         = var.image
  ledger_secret = var.ledger_secret
  region_keys   = var.region_keys["eu"]
  operator_key  = var.operator_key
  geodns        = local.geodns["eu"]
  cells         = lookup(var.cells, "eu", 3)
}

module "sin" {
  source        = "../region"
  providers     = { openstack = openstack.sin }
  region        = "sin"
  gate_port_id  = local.ports["sin"]
  gate_ip       = local.gates["sin"]
  peers         = { for r, ip in local.gates : r => ip if r != "sin" }
  public_url    = "https://sin.${trimsuffix(var.zone, ".")}"
  key_pair      = var.key_pair
  image         = var.image
  ledger_secret = var.ledger_secret
  region_keys   = var.region_keys["sin"]
  operator_key  = var.operator_key
  geodns        = local.geodns["sin"]
  cells         = lookup(var.cells, "sin", 3)
}

module "us" {
  source        = "../region"
  providers     = { openstack = openstack.us }
  region        = "us"
  gate_port_id  = local.ports["us"]
  gate_ip       = local.gates["us"]
  peers         = { for r, ip in local.gates : r => ip if r != "us" }
  public_url    = "https://us.${trimsuffix(var.zone, ".")}"
  key_pair      = var.key_pair
  image         = var.image
  ledger_secret = var.ledger_secret
  region_keys   = var.region_keys["us"]
  operator_key  = var.operator_key
  geodns        = local.geodns["us"]
  cells         = lookup(var.cells, "us", 3)
}

module "dns" {
  source    = "../dns"
  providers = { openstack = openstack.dns }
  zone      = var.zone
  email     = var.email
  gates     = local.gates
  nearest   = local.nearest ? module.geodns[0].name_servers : null
}

output "gates" {
  value = local.gates
}

output "names" {
  value = module.dns.region_names
}

output "api_name" {
  value = module.dns.api_name
}

output "dns_zone" {
  description = "With client_cidrs or geoip_database: the zone api.<zone> every gate's PowerDNS serves."
  value       = local.nearest ? module.geodns[0].zone : null
}
