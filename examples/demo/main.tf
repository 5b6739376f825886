# Terraplane's demo stack: built-in resources only, so it runs anywhere.
variable "environment" {
  type    = string
  default = "demo"
}

resource "terraform_data" "network" {
  input = {
    name = "${var.environment}-network"
    cidr = "10.42.0.0/16"
  }
}

resource "terraform_data" "app" {
  input            = "${var.environment}-app"
  triggers_replace = [terraform_data.network.output]
}

output "network" {
  value = terraform_data.network.output
}

output "app" {
  value = terraform_data.app.output
}
