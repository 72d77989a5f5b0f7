// defines: sf::jinja::parse — tokens → statement tree, following jinja2's parser (precedence,
// tags, filters and tests checked at parse time as jinja2 checks them at compile time).
#pragma once

#include <string>

#include "data/jinja/ast.h"

namespace sf::jinja {

// Throws TemplateError naming `name`, the line and the construct on a syntax error, an unknown or
// unsupported tag, or an unknown filter/test outside a conditional.
Body parse(const std::string& source, const std::string& name);

}  // namespace sf::jinja
