# Terraplane's demo stack: resources of the `sandbox` provider, a small fake cloud kept as
# JSON files (in `terraplane dev`, under <data-dir>/sandbox/<org>/<stack>). Edit or delete a
# file there and a drift check (`tpctl drift check demo --wait`) finds it, as it would a
# change made in a cloud console.
terraform {
  required_providers {
    sandbox = { source = "terraplane/sandbox" }
  }
}

variable "environment" {
  type    = string
  default = "demo"
}

resource "sandbox_security_group" "web" {
  name = "${var.environment}-web"
  ingress {
    from_port   = 443
    to_port     = 443
    protocol    = "tcp"
    cidr_blocks = ["0.0.0.0/0"]
  }
  tags = { environment = var.environment }
}

resource "sandbox_instance" "app" {
  name          = "${var.environment}-app"
  instance_type = "t3.small"
  tags = {
    environment    = var.environment
    security_group = sandbox_security_group.web.id
  }
}

resource "sandbox_bucket" "logs" {
  name       = "${var.environment}-logs"
  versioning = true
  tags       = { environment = var.environment }
}

output "app_private_ip" {
  value = sandbox_instance.app.private_ip
}

output "bucket_arn" {
  value = sandbox_bucket.logs.arn
}
