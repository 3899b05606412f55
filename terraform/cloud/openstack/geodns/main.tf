# The nearest region by DNS: the PowerDNS (Authoritative Server 4.7,
# Debian's pdns-server and pdns-backend-bind) configuration and zone that
# every gate serves for the delegated subzone api.<zone>. Nothing here is a
# cloud resource: ../region writes these files on its gate (its `geodns`
# input), ../dns delegates api.<zone> to the gates (its `nearest` input).
#
#   api.<zone>           a LUA A record: the client's region, chosen by its
#                        network (the EDNS Client Subnet, else the resolver's
#                        address: PowerDNS's bestwho) in the operator's
#                        client_cidrs with view(), that region's gate if its
#                        /health answers, else another live gate (closest
#                        by GeoIP with a database, else random);
#   <region>.api.<zone>  A, each gate: the subzone's name servers (glued in
#                        the parent zone) and a region pinned by name.
#
# docs/terraform.md ("The nearest region") says how to delegate, what the
# test proves and what it does not.

terraform {
  required_version = ">= 1.9"
}

variable "zone" {
  description = "The parent zone, with its final dot (trawl.example.): the subzone served is api.<zone>."
  type        = string
  validation {
    condition     = endswith(var.zone, ".") && can(regex("^([a-z0-9]([a-z0-9-]*[a-z0-9])?\\.)+$", var.zone))
    error_message = "zone must be a lower-case DNS name ending with a dot."
  }
}

variable "email" {
  description = "The zone's contact (SOA)."
  type        = string
  validation {
    condition     = can(regex("^[^@\\s]+@[^@\\s]+$", var.email))
    error_message = "email must be an address."
  }
}

variable "gates" {
  description = "Each region's gate IPv4, by region."
  type        = map(string)
  validation {
    condition     = length(var.gates) >= 1 && alltrue([for r, ip in var.gates : can(regex("^[a-z0-9]{1,16}$", r)) && can(cidrhost("${ip}/32", 0)) && !strcontains(ip, ":")])
    error_message = "gates maps region names ([a-z0-9]{1,16}) to IPv4 addresses."
  }
}

variable "client_cidrs" {
  description = "The client networks (IPv4 or IPv6 CIDRs) each region serves, by region. A client (its EDNS Client Subnet, else its resolver) is sent to the region of the most specific CIDR that holds it; 0.0.0.0/0 and ::/0 in one region make it the default."
  type        = map(list(string))
  default     = {}
  validation {
    condition     = alltrue([for r, cidrs in var.client_cidrs : contains(keys(var.gates), r)])
    error_message = "client_cidrs names a region that has no gate."
  }
  validation {
    condition     = alltrue(flatten([for r, cidrs in var.client_cidrs : [for c in cidrs : strcontains(c, "/") && can(cidrhost(c, 0))]]))
    error_message = "client_cidrs: every entry must be a CIDR (10.1.0.0/16, 2001:db8::/32)."
  }
  validation {
    condition     = var.geoip_database != "" || alltrue([for r, ip in var.gates : length(lookup(var.client_cidrs, r, [])) > 0])
    error_message = "without a GeoIP database (geoip_database), every region needs its client_cidrs."
  }
}

variable "geoip_database" {
  description = "A MaxMind GeoIP2/GeoLite2 City database (.mmdb) on every gate, e.g. /var/lib/GeoIP/GeoLite2-City.mmdb: launches PowerDNS's geoip backend so that a client outside every client_cidrs goes to the closest live gate (pickclosest). Empty: no GeoIP."
  type        = string
  default     = ""
  validation {
    condition     = var.geoip_database == "" || can(regex("^/[A-Za-z0-9._/-]+\\.(mmdb|dat)$", var.geoip_database))
    error_message = "geoip_database must be an absolute path to a .mmdb (or legacy .dat) file: PowerDNS picks the reader by the extension."
  }
}

variable "health_port" {
  description = "The gates' port of GET /health."
  type        = number
  default     = 8081
}

variable "health_path" {
  type    = string
  default = "/health"
  validation {
    condition     = can(regex("^/[A-Za-z0-9._~/?=&%-]*$", var.health_path))
    error_message = "health_path must be a path."
  }
}

variable "health_match" {
  description = "A gate is up when its /health answers 200 with a body holding this text (a degraded gate, with no live cell or no ledger leader, is left out). Empty: any 200."
  type        = string
  default     = "\"status\":\"ok\""
  validation {
    condition     = !can(regex("['\\\\\\n]", var.health_match))
    error_message = "health_match must not hold a quote ('), a backslash or a new line."
  }
}

variable "ttl" {
  description = "TTL of the answers (seconds): how long a resolver keeps a gate that went down."
  type        = number
  default     = 30
}

variable "config_dir" {
  description = "Where the gate keeps named.conf and the zone."
  type        = string
  default     = "/etc/powerdns/trawl"
}

locals {
  subzone    = "api.${var.zone}"
  hostname   = trimsuffix(local.subzone, ".")
  hostmaster = "${replace(split("@", var.email)[0], ".", "\\.")}.${split("@", var.email)[1]}."
  regions    = sort(keys(var.gates))
  selector   = var.geoip_database != "" ? "pickclosest" : "random"
  # The view() rules, most specific first (a region's 10.1.2.0/24 wins
  # over another's 10.0.0.0/8 or a default 0.0.0.0/0): one per CIDR.
  rule_keys = sort(flatten([for r, cidrs in var.client_cidrs : [for c in cidrs : format("%03d %s %s", 200 - tonumber(split("/", c)[1]), r, c)]]))
  rules     = [for k in local.rule_keys : { region = split(" ", k)[1], cidr = split(" ", k)[2] }]
  # A region's address sets for ifurlup: its gate first, then the others.
  sets = { for r in local.regions : r => join(", ", compact([
    "{'${var.gates[r]}'}",
    length(local.regions) > 1 ? "{${join(", ", [for o in local.regions : "'${var.gates[o]}'" if o != r])}}" : "",
  ])) }
  all = join(", ", [for r in local.regions : "'${var.gates[r]}'"])
  # The health text as a Lua string: a double quote cannot be written in
  # the zone's quoted LUA record, so it is string.char(34).
  match_lua = "'${replace(var.health_match, "\"", "' .. string.char(34) .. '")}'"
  zone_file = "${var.config_dir}/${local.hostname}.zone"

  zone = templatefile("${path.module}/zone.tftpl", {
    subzone    = local.subzone
    hostmaster = local.hostmaster
    ttl        = var.ttl
    gates      = { for r in local.regions : r => var.gates[r] }
    primary    = "${local.regions[0]}.${local.subzone}"
    url        = "http://${local.hostname}:${var.health_port}${var.health_path}"
    match      = local.match_lua
    rules      = local.rules
    sets       = local.sets
    all        = local.all
    selector   = local.selector
  })
  named_conf = templatefile("${path.module}/named.conf.tftpl", {
    config_dir = var.config_dir
    zone       = local.hostname
    file       = local.zone_file
  })
  files = merge(
    { "${var.config_dir}/named.conf" = local.named_conf, (local.zone_file) = local.zone },
    var.geoip_database == "" ? {} : { "${var.config_dir}/geoip-zones.yaml" = "# No geoip zones: the backend only gives LUA records their GeoIP lookups (pickclosest).\ndomains: []\n" },
  )
}

output "subzone" {
  description = "The delegated subzone (api.<zone>.)."
  value       = local.subzone
}

output "name_servers" {
  description = "The subzone's name servers, by region (<region>.api.<zone>.): the parent's NS records and their glue."
  value       = { for r in local.regions : r => "${r}.${local.subzone}" }
}

output "files" {
  description = "The files every gate writes, by path: named.conf, the zone (and the geoip backend's empty zones file)."
  value       = local.files
}

output "pdns_conf" {
  description = "Each gate's /etc/powerdns/pdns-trawl.conf (systemd unit pdns@trawl), by region: the same but for the address it listens on."
  value = { for r in local.regions : r => templatefile("${path.module}/pdns.conf.tftpl", {
    region     = r
    subzone    = local.subzone
    listen     = var.gates[r]
    config_dir = var.config_dir
    geoip      = var.geoip_database
    exec_limit = 1000 + 20 * length(local.rules)
  }) }
}

output "packages" {
  description = "The Debian packages a gate installs for it."
  value       = concat(["pdns-server", "pdns-backend-bind"], var.geoip_database == "" ? [] : ["pdns-backend-geoip"])
}

output "zone" {
  description = "The zone file's text."
  value       = local.zone
}
