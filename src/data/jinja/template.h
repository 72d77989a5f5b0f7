// defines: sf::jinja::Template — a parsed Jinja template (the subset chat templates use) rendered
// as transformers renders it: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
// extensions=[loopcontrols, generation]) with tojson, raise_exception, strftime_now, namespace and
// dict as transformers installs them. Outside the subset → TemplateError naming construct and line.
#pragma once

#include <memory>
#include <string>

#include "data/jinja/ast.h"
#include "data/jinja/value.h"

namespace sf::jinja {

class Template {
 public:
  // Parses `source`; `name` appears in error messages ("chat template <name> line N: ...").
  explicit Template(std::string source, std::string name = "<string>");

  // `context`: a dict of the variables the template sees (messages, add_generation_prompt, ...).
  // Throws TemplateError (with line) on a runtime error, RaisedError for raise_exception(msg).
  std::string render(const Value& context) const;

  const std::string& source() const { return source_; }
  const std::string& name() const { return name_; }

 private:
  std::string source_, name_;
  std::shared_ptr<const Body> body_;
};

}  // namespace sf::jinja
